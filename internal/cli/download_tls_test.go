package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// tlsStore serves every download as a gzipped log over TLS with a
// certificate of its own CA, as an object store with a private CA does.
func tlsStore(t *testing.T, log string) (*httptest.Server, []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(log)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(buf.Bytes()) }))
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, caPEM
}

func TestDownloadsTrustTheLocationCAOrCACertFlag(t *testing.T) {
	const log = "level=info msg=done\n"
	srv, caPEM := tlsStore(t, log)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	urls := serveDownloads(func(v1.DownloadTarget) string { return srv.URL + "/file?X-Amz-Signature=secret" })
	restore := &v1.Restore{ObjectMeta: objMeta("r", nil), Spec: v1.RestoreSpec{BackupName: "web"}, Status: v1.RestoreStatus{Phase: v1.RestorePhaseCompleted}}

	for _, tc := range []struct {
		name string
		loc  func(*v1.BackupStorageLocation) []client.Object
		args []string
		ok   bool
	}{
		{name: "system CAs only", ok: false},
		{name: "--cacert", args: []string{"--cacert", caFile}, ok: true},
		{name: "--insecure-skip-tls-verify", args: []string{"--insecure-skip-tls-verify"}, ok: true},
		{name: "location caCert", loc: func(l *v1.BackupStorageLocation) []client.Object {
			l.Spec.ObjectStorage.CACert = caPEM
			return nil
		}, ok: true},
		{name: "location caCertRef wins over caCert", loc: func(l *v1.BackupStorageLocation) []client.Object {
			l.Spec.ObjectStorage.CACert = []byte("not a certificate")
			l.Spec.ObjectStorage.CACertRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "store-ca"}, Key: "ca.crt"}
			return []client.Object{&corev1.Secret{ObjectMeta: objMeta("store-ca", nil), Data: map[string][]byte{"ca.crt": caPEM}}}
		}, ok: true},
	} {
		for _, cmdline := range [][]string{
			{"backup", "logs", "web"},
			{"restore", "logs", "r"},
			{"backup", "download", "web", "-o", "-"},
		} {
			loc := location("default")
			objs := []client.Object{}
			if tc.loc != nil {
				objs = append(objs, tc.loc(loc)...)
			}
			web, _ := sampleBackups()
			objs = append(objs, loc, web, restore.DeepCopy())
			c := newFakeBuilder(t, objs...).WithInterceptorFuncs(urls).Build()
			out, _, err := run(t, newTestFactory(c), append(cmdline, tc.args...)...)
			name := tc.name + ": " + strings.Join(cmdline, " ")
			if tc.ok {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				} else if cmdline[1] == "logs" && out != log {
					t.Errorf("%s: printed %q", name, out)
				}
			} else if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("%s: error %v, want a certificate error", name, err)
			} else if strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: error shows the signed URL: %v", name, err)
			}
		}
	}
	// Velero's client config supplies the default of --cacert.
	f := newTestFactory(newFakeBuilder(t, location("default"), func() *v1.Backup { b, _ := sampleBackups(); return b }()).WithInterceptorFuncs(urls).Build())
	f.CACertFile = caFile
	if out, _, err := run(t, f, "backup", "logs", "web"); err != nil || out != log {
		t.Errorf("cacert from the client config: %v %q", err, out)
	}
}
