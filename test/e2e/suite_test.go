// Package e2e runs Lifeboat end to end: a real kube-apiserver with etcd, the
// real controllers, real filesystem and S3 (versitygw) storage, and the CLI.
package e2e

import (
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{WithS3: true}, &env)
}
