package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

// The store as the server uses it: the Server main serves, served in
// process by plugintest, called through the server's ObjectStore client
// over the plugin protocol (bodies streamed in chunks, errors as
// *framework.PluginError).
func TestStoreThroughThePluginProtocol(t *testing.T) {
	conn := plugintest.Serve(t, newServer())
	if ids := conn.Plugins(); len(ids) != 1 || ids[0].Kind != api.KindObjectStore || ids[0].Name != Name {
		t.Fatalf("the binary serves %+v, want only ObjectStore %s", ids, Name)
	}
	st := conn.ObjectStore(Name)

	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := st.Init(map[string]string{RootKey: root, "bucket": "bucket", "rooot": "typo"})
	if pe := (*framework.PluginError)(nil); !errors.As(err, &pe) || pe.Method != "Init" || !strings.Contains(pe.Message(), `unknown config keys ["rooot"]`) {
		t.Fatalf("Init with a typo: %v, want the plugin's error naming the key", err)
	}
	if err := st.Init(map[string]string{RootKey: root, "bucket": "bucket", "prefix": "p"}); err != nil {
		t.Fatal(err)
	}

	// More than one chunk of the gRPC stream, to see it whole on both ways.
	big := strings.Repeat("0123456789abcdef", 1<<16)
	for key, body := range map[string]string{
		"p/backups/one/velero-backup.json": "{}",
		"p/backups/one/one.tar.gz":         big,
		"p/backups/two/velero-backup.json": "{}",
	} {
		if err := st.PutObject("bucket", key, strings.NewReader(body)); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
	}
	rc, err := st.GetObject("bucket", "p/backups/one/one.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(got) != big {
		t.Errorf("GetObject read %d bytes (%v), want %d", len(got), err, len(big))
	}
	if ok, err := st.ObjectExists("bucket", "p/backups/two/velero-backup.json"); !ok || err != nil {
		t.Errorf("ObjectExists = %v, %v", ok, err)
	}
	prefixes, err := st.ListCommonPrefixes("bucket", "p/backups/", "/")
	if want := []string{"p/backups/one/", "p/backups/two/"}; err != nil || !slices.Equal(prefixes, want) {
		t.Errorf("ListCommonPrefixes = %q, %v; want %q", prefixes, err, want)
	}
	if err := st.DeleteObject("bucket", "p/backups/two/velero-backup.json"); err != nil {
		t.Fatal(err)
	}
	keys, err := st.ListObjects("bucket", "p/")
	if want := []string{"p/backups/one/one.tar.gz", "p/backups/one/velero-backup.json"}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("ListObjects after DeleteObject = %q, %v; want %q", keys, err, want)
	}
	if url, err := st.CreateSignedURL("bucket", "p/backups/one/one.tar.gz", time.Minute); err != nil || url != "file://"+filepath.Join(root, "bucket/p/backups/one/one.tar.gz") {
		t.Errorf("CreateSignedURL = %q, %v", url, err)
	}

	// A key that would leave the bucket is refused by the plugin, and the
	// refusal reaches the server as the plugin's error.
	err = st.PutObject("bucket", "../escape", strings.NewReader("x"))
	if pe := (*framework.PluginError)(nil); !errors.As(err, &pe) || pe.Name != Name || !strings.Contains(pe.Message(), "would leave the bucket") {
		t.Errorf("PutObject of ../escape: %v, want the plugin's refusal", err)
	}
	if _, err := os.Stat(filepath.Join(root, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file outside the bucket: %v", err)
	}
}
