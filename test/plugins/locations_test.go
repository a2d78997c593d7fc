package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/storage/pluginstore"
)

// TestLocationsOfOnePluginKeepTheirOwnConfig opens two locations served by
// the same ObjectStore plugin with different configs, as the server does
// when it validates one location while a backup writes to another, and
// writes through the first. A plugin keeps one instance per name in its
// process, so the host gives each distinct Init config its own process;
// otherwise the second Init would re-point the first location.
func TestLocationsOfOnePluginKeepTheirOwnConfig(t *testing.T) {
	h := testHost(t)
	open := func() (*pluginstore.Store, string) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "bucket"), 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := h.ObjectStore("example.io/dirstore")
		if err != nil {
			t.Fatal(err)
		}
		s, err := pluginstore.New(p, "example.io/dirstore", map[string]string{"root": root}, "bucket", "", "")
		if err != nil {
			t.Fatal(err)
		}
		return s, root
	}
	a, rootA := open()
	_, _ = open()
	if err := a.PutObject(t.Context(), "bucket", "k", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rootA, "bucket", "k")); err != nil {
		t.Errorf("an object written through location A is not under A's root: %v", err)
	}
}
