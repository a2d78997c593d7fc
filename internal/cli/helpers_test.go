package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// testNow is the fixed "now" of every test, so relative times are stable.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newFakeBuilder returns a fake client builder with every kind the CLI uses.
func newFakeBuilder(t *testing.T, objs ...client.Object) *fake.ClientBuilder {
	t.Helper()
	return fake.NewClientBuilder().
		WithScheme(testScheme(t)).
		WithStatusSubresource(&v1.Backup{}, &v1.DownloadRequest{}, &v1.BackupStorageLocation{}).
		WithObjects(objs...)
}

func newTestFactory(c client.Client) *Factory {
	f := NewFactory()
	// Tests do not depend on the VELERO_NAMESPACE or Velero client config
	// of whoever runs them.
	f.Namespace, f.CACertFile = v1.DefaultNamespace, ""
	f.NewClient = func() (client.Client, error) { return c, nil }
	f.Now = func() time.Time { return testNow }
	f.Location = time.UTC
	f.PollInterval = time.Millisecond
	return f
}

// run executes the lifeboat command line against f and returns what it
// printed to stdout and stderr.
func run(t *testing.T, f *Factory, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCommand(f)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func location(name string) *v1.BackupStorageLocation {
	return &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1.DefaultNamespace},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "backups"}},
		},
	}
}

// writeGzip writes data gzipped to dir/name and returns the path.
func writeGzip(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveDownloads makes the fake client answer DownloadRequests the way the
// server does: the first read after creation finds them Processed with the
// URL urls returns for the target.
func serveDownloads(urls func(v1.DownloadTarget) string) interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if dr, ok := obj.(*v1.DownloadRequest); ok {
				dr.Status.Phase = v1.DownloadRequestPhaseProcessed
				dr.Status.DownloadURL = urls(dr.Spec.Target)
			}
			return nil
		},
	}
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
