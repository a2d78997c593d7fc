package plugintest_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

// newServer is what a plugin binary's main serves: main calls
// newServer().Serve(), and its tests serve the same Server in process.
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterObjectStore("example.io/store", func(*slog.Logger) (api.ObjectStore, error) { return &store{}, nil })
}

// A test of everything a binary serves: the names it registers, the
// initializers, and each plugin through the client the server uses. The
// body below is a test function's; t is its *testing.T.
func ExampleServe() {
	testStore := func(t *testing.T) {
		conn := plugintest.Serve(t, newServer())
		if ids := conn.Plugins(); len(ids) != 1 || ids[0].Name != "example.io/store" {
			t.Fatalf("the binary serves %v", ids)
		}
		st := conn.ObjectStore("example.io/store")
		if err := st.Init(map[string]string{"bucket": "backups"}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutObject("backups", "nightly/velero-backup.json", strings.NewReader("{}")); err != nil {
			t.Fatal(err)
		}
	}
	_ = testStore
}

// A test of one implementation, served on its own. The body below is a
// test function's; t is its *testing.T.
func ExampleDeleteItemAction() {
	testDelete := func(t *testing.T) {
		impl := &deleteAction{}
		dia := plugintest.DeleteItemAction(t, "example.io/cleanup", impl)
		if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: item(), Backup: backup()}); err != nil {
			t.Fatal(err)
		}
		// The test can look into impl: same process, no copy of it.
		if len(impl.calls) != 1 {
			t.Errorf("%d calls", len(impl.calls))
		}
	}
	_ = testDelete
}
