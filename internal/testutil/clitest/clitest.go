// Package clitest runs the lifeboat CLI in the test's process, as a user
// would from a shell: the real root command, flags and output, against a
// test cluster.
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/cli"
)

// Timeout bounds one command.
const Timeout = 3 * time.Minute

// Run runs `lifeboat --kubeconfig KUBECONFIG ARGS...` with stdin (nil: no
// input, as without a terminal) and returns what it printed, stdout and
// stderr together.
func Run(kubeconfig string, stdin io.Reader, args ...string) (string, error) {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd := cli.NewRootCommand()
	var out bytes.Buffer
	cmd.SetIn(stdin)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// Must is Run that fails the test on an error, printing the output.
func Must(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := Run(kubeconfig, nil, args...)
	if err != nil {
		t.Fatalf("lifeboat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
