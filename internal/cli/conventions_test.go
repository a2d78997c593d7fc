package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// commandPaths lists every command's path below the root, without the
// root's name: ["backup"], ["backup", "create"], ...
func commandPaths(t *testing.T) (groups, leaves [][]string) {
	t.Helper()
	walk(newRootCommand(newTestFactory(nil)), func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		if c.HasSubCommands() {
			groups = append(groups, path)
		} else {
			leaves = append(leaves, path)
		}
	})
	return groups, leaves
}

// An unknown subcommand of any group is an error naming it, not the help
// text with exit code 0 (`lifeboat schedule delet x` used to "succeed").
func TestUnknownSubcommandIsAnError(t *testing.T) {
	groups, _ := commandPaths(t)
	if len(groups) < 5 {
		t.Fatalf("found only %d command groups", len(groups))
	}
	for _, g := range groups {
		args := append(append([]string{}, g...), "nosuchverb", "x")
		out, errOut, err := run(t, newTestFactory(nil), args...)
		if err == nil {
			t.Errorf("lifeboat %s: no error; printed %q", strings.Join(args, " "), out)
			continue
		}
		if !strings.Contains(err.Error(), `"nosuchverb"`) {
			t.Errorf("lifeboat %s: error %q does not name the unknown command", strings.Join(args, " "), err)
		}
		if out != "" || errOut != "" {
			t.Errorf("lifeboat %s printed %q / %q besides the error", strings.Join(args, " "), out, errOut)
		}
	}
	// A group alone still shows its help, as in Velero.
	out, _, err := run(t, newTestFactory(nil), "schedule")
	if err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("lifeboat schedule: err %v, out %q", err, out)
	}
	// A near miss is suggested.
	_, _, err = run(t, newTestFactory(nil), "schedule", "creat")
	if err == nil || !strings.Contains(err.Error(), "create") {
		t.Errorf("lifeboat schedule creat: %v, want a suggestion of create", err)
	}
}

func TestUnknownFlagIsAnError(t *testing.T) {
	groups, leaves := commandPaths(t)
	for _, path := range append(groups, leaves...) {
		args := append(append([]string{}, path...), "--no-such-flag")
		_, _, err := run(t, newTestFactory(nil), args...)
		if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
			t.Errorf("lifeboat %s: error %v, want one naming the flag", strings.Join(args, " "), err)
		}
	}
}

// Every leaf command says which arguments it takes, so that a stray word
// (`lifeboat install now`) is refused instead of ignored.
func TestEveryCommandDeclaresItsArgs(t *testing.T) {
	walk(newRootCommand(newTestFactory(nil)), func(c *cobra.Command) {
		if c.Args == nil && c.Runnable() && c.Name() != "help" {
			t.Errorf("%s accepts any arguments (no Args)", c.CommandPath())
		}
	})
	for _, args := range [][]string{{"install", "now"}, {"uninstall", "now"}, {"server", "now"}, {"version", "now"}, {"plugin", "get", "x"}} {
		_, _, err := run(t, newTestFactory(nil), args...)
		if err == nil || !strings.Contains(err.Error(), "now") && !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("lifeboat %s: error %v, want one naming the stray argument", strings.Join(args, " "), err)
		}
	}
}

// writeTwoContextKubeconfig writes a kubeconfig with two contexts, a (current) and b,
// pointing at different servers.
func writeTwoContextKubeconfig(t *testing.T) string {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u, namespace: ignored}
users:
- name: u
  user: {token: x}
current-context: a
`
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostAfter parses args with the root command (running `version
// --client-only`, which needs no cluster) and returns the API server the
// factory would talk to.
func hostAfter(t *testing.T, args ...string) (*Factory, string) {
	t.Helper()
	f := NewFactory()
	if _, _, err := run(t, f, append(args, "version", "--client-only")...); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg.Host
}

func TestKubecontextSelectsTheContext(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("VELERO_NAMESPACE", "")
	kc := writeTwoContextKubeconfig(t)
	if _, host := hostAfter(t, "--kubeconfig", kc); host != "https://a.example:6443" {
		t.Errorf("current context: host %s", host)
	}
	if _, host := hostAfter(t, "--kubeconfig", kc, "--kubecontext", "b"); host != "https://b.example:6443" {
		t.Errorf("--kubecontext b: host %s", host)
	}
	// kubectl's spelling stays as an alias.
	if _, host := hostAfter(t, "--kubeconfig", kc, "--context", "b"); host != "https://b.example:6443" {
		t.Errorf("--context b: host %s", host)
	}
	t.Setenv("KUBECONFIG", kc)
	if _, host := hostAfter(t, "--kubecontext", "b"); host != "https://b.example:6443" {
		t.Errorf("KUBECONFIG with --kubecontext b: host %s", host)
	}
	// The context's namespace is not Lifeboat's namespace (Velero ignores it too).
	if f, _ := hostAfter(t, "--kubecontext", "b"); f.Namespace != "velero" {
		t.Errorf("namespace %q, want velero", f.Namespace)
	}
	_, _, err := run(t, NewFactory(), "--kubecontext", "nosuch", "backup", "get")
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown context: %v", err)
	}
}

// The namespace defaults as in Velero: VELERO_NAMESPACE, overridden by
// the namespace in Velero's client config file, overridden by -n.
func TestNamespaceDefaultsAsVelero(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("VELERO_NAMESPACE", "")
	if f := NewFactory(); f.Namespace != "velero" {
		t.Errorf("default namespace %q", f.Namespace)
	}
	t.Setenv("VELERO_NAMESPACE", "from-env")
	if f := NewFactory(); f.Namespace != "from-env" {
		t.Errorf("with VELERO_NAMESPACE: %q", f.Namespace)
	}
	dir := filepath.Join(home, ".config", "velero")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"namespace":"from-config","cacert":"/etc/ca.pem"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewFactory()
	if f.Namespace != "from-config" || f.CACertFile != "/etc/ca.pem" {
		t.Errorf("with config file: namespace %q cacert %q", f.Namespace, f.CACertFile)
	}
	if _, _, err := run(t, f, "-n", "from-flag", "version", "--client-only"); err != nil {
		t.Fatal(err)
	}
	if f.Namespace != "from-flag" {
		t.Errorf("with -n: %q", f.Namespace)
	}
}

// Velero's verb-first spellings run the same commands.
func TestVerbFirstForms(t *testing.T) {
	web, db := sampleBackups()
	c := newFakeBuilder(t, web, db, &v1.Schedule{ObjectMeta: objMeta("nightly", nil), Spec: v1.ScheduleSpec{Schedule: "@daily"}}, location("default")).Build()
	f := newTestFactory(c)
	for _, pair := range [][2][]string{
		{{"get", "backups"}, {"backup", "get"}},
		{{"get", "backup", "web"}, {"backup", "get", "web"}},
		{{"get", "backup-locations"}, {"backup-location", "get"}},
		{{"describe", "backups", "web"}, {"backup", "describe", "web"}},
		{{"describe", "schedule", "nightly", "-o", "json"}, {"schedule", "describe", "nightly", "-o", "json"}},
		{{"create", "backup", "x", "--include-namespaces", "a", "-o", "yaml"}, {"backup", "create", "x", "--include-namespaces", "a", "-o", "yaml"}},
	} {
		got, _, err := run(t, f, pair[0]...)
		if err != nil {
			t.Errorf("%v: %v", pair[0], err)
			continue
		}
		want, _, err := run(t, f, pair[1]...)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || got == "" {
			t.Errorf("%v printed\n%s\nbut %v printed\n%s", pair[0], got, pair[1], want)
		}
	}
	if out, _, err := run(t, f, "delete", "schedule", "nightly", "--confirm"); err != nil || out != "Schedule deleted: nightly\n" {
		t.Errorf("delete schedule: %v %q", err, out)
	}
	if _, _, err := run(t, f, "get", "widgets"); err == nil || !strings.Contains(err.Error(), `"widgets"`) {
		t.Errorf("get widgets: %v", err)
	}
}
