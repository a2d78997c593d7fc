package builtinplugin

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestFilesystemThroughThePluginInterface(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New("lifeboat.io/filesystem")
	if err := s.Init(map[string]string{"path": root, "bucket": "b", "prefix": "p"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject("b", "p/backups/x/velero-backup.json", bytes.NewReader([]byte("{}"))); err != nil {
		t.Fatal(err)
	}
	ok, err := s.ObjectExists("b", "p/backups/x/velero-backup.json")
	if err != nil || !ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
	rc, err := s.GetObject("b", "p/backups/x/velero-backup.json")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(data) != "{}" {
		t.Errorf("read %q", data)
	}
	prefixes, err := s.ListCommonPrefixes("b", "p/backups/", "/")
	if err != nil || len(prefixes) != 1 || prefixes[0] != "p/backups/x/" {
		t.Errorf("prefixes %v %v", prefixes, err)
	}
	if err := New("velero.io/aws").Init(map[string]string{"bogus": "1"}); err == nil {
		t.Error("an unknown config key must fail Init")
	}
}
