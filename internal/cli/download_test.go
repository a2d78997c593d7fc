package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// assertNoDownloadRequests checks that a command cleaned up after itself.
func assertNoDownloadRequests(t *testing.T, c client.Client) {
	t.Helper()
	list := &v1.DownloadRequestList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, dr := range list.Items {
		t.Errorf("DownloadRequest %s (%s of %s) left behind", dr.Name, dr.Spec.Target.Kind, dr.Spec.Target.Name)
	}
}

// fileStore serves a backup's files from dir by their Velero key names,
// like the filesystem store does.
func fileStore(dir string) func(v1.DownloadTarget) string {
	return func(target v1.DownloadTarget) string {
		var name string
		switch target.Kind {
		case v1.DownloadTargetKindBackupLog:
			name = target.Name + "-logs.gz"
		case v1.DownloadTargetKindBackupContents:
			name = target.Name + ".tar.gz"
		case v1.DownloadTargetKindBackupResourceList:
			name = target.Name + "-resource-list.json.gz"
		}
		return (&url.URL{Scheme: "file", Path: filepath.Join(dir, name)}).String()
	}
}

func TestBackupLogsFromFileURL(t *testing.T) {
	dir := t.TempDir()
	log := "level=info msg=\"backup started\"\nlevel=info msg=\"backup completed\" items=10\n"
	writeGzip(t, dir, "web-logs.gz", []byte(log))
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(fileStore(dir))).Build()

	out, _, err := run(t, newTestFactory(c), "backup", "logs", "web")
	if err != nil {
		t.Fatal(err)
	}
	if out != log {
		t.Errorf("logs = %q, want %q", out, log)
	}
	assertNoDownloadRequests(t, c)
}

func TestBackupLogsMissingFile(t *testing.T) {
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(fileStore(t.TempDir()))).Build()
	_, _, err := run(t, newTestFactory(c), "backup", "logs", "web")
	if err == nil || !strings.Contains(err.Error(), `backup "web" has no log`) {
		t.Errorf("error = %v, want it to say the log is missing", err)
	}
	assertNoDownloadRequests(t, c)
}

func TestBackupDownloadFromFileURL(t *testing.T) {
	store := t.TempDir()
	tarball := []byte("not really a tarball, but the bytes must arrive unchanged")
	if err := os.WriteFile(filepath.Join(store, "web.tar.gz"), tarball, 0o600); err != nil {
		t.Fatal(err)
	}
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(fileStore(store))).Build()
	f := newTestFactory(c)

	t.Chdir(t.TempDir())
	out, _, err := run(t, f, "backup", "download", "web")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("web-data.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(tarball) {
		t.Errorf("downloaded %q, want %q", got, tarball)
	}
	if !strings.Contains(out, "web-data.tar.gz") {
		t.Errorf("output does not say where the file went: %q", out)
	}
	assertNoDownloadRequests(t, c)

	if _, _, err := run(t, f, "backup", "download", "web"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second download: error = %v, want a refusal mentioning --force", err)
	}
	if err := os.WriteFile("web-data.tar.gz", []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, f, "backup", "download", "web", "--force"); err != nil {
		t.Fatalf("download --force: %v", err)
	}
	if got, _ := os.ReadFile("web-data.tar.gz"); string(got) != string(tarball) {
		t.Errorf("--force did not overwrite: %q", got)
	}

	if _, _, err := run(t, f, "backup", "download", "web", "-o", "other.tgz"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile("other.tgz"); string(got) != string(tarball) {
		t.Errorf("-o other.tgz holds %q", got)
	}
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		if strings.Contains(e.Name(), "partial") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestBackupDownloadFromHTTPURL(t *testing.T) {
	tarball := "tarball bytes over http"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bucket/backups/web/web.tar.gz" || r.URL.Query().Get("X-Amz-Signature") != "secret" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(tarball))
	}))
	defer srv.Close()

	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(func(target v1.DownloadTarget) string {
		return srv.URL + "/bucket/backups/" + target.Name + "/" + target.Name + ".tar.gz?X-Amz-Signature=secret"
	})).Build()
	f := newTestFactory(c)
	f.HTTPClient = srv.Client()

	out, _, err := run(t, f, "backup", "download", "web", "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	if out != tarball {
		t.Errorf("downloaded %q, want %q", out, tarball)
	}
	assertNoDownloadRequests(t, c)
}

func TestDownloadHTTPErrorsHideSignature(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "AccessDenied", http.StatusForbidden)
	}))
	defer srv.Close()
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(func(v1.DownloadTarget) string {
		return srv.URL + "/web.tar.gz?X-Amz-Signature=topsecret"
	})).Build()
	f := newTestFactory(c)
	f.HTTPClient = srv.Client()
	_, _, err := run(t, f, "backup", "download", "web", "-o", "-")
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("error = %v, want the HTTP status and body", err)
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error leaks the URL signature: %v", err)
	}
}

func TestDownloadRequestNotProcessed(t *testing.T) {
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).Build() // no server answers
	_, _, err := run(t, newTestFactory(c), "backup", "logs", "web", "--timeout", "30ms")
	if err == nil || !strings.Contains(err.Error(), "was not processed") || !strings.Contains(err.Error(), "lifeboat server") {
		t.Errorf("error = %v, want a timeout that points at the server", err)
	}
	assertNoDownloadRequests(t, c)
}

func TestRequestName(t *testing.T) {
	a, b := requestName("web"), requestName("web")
	if !strings.HasPrefix(a, "web-") || len(a) != len("web-")+5 || a == b {
		t.Errorf("requestName gave %q and %q", a, b)
	}
	if got := requestName(strings.Repeat("x", 300)); len(got) > 253 {
		t.Errorf("requestName is %d characters long", len(got))
	}
}
