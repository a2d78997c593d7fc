package locations

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// A location's store behind TLS with a private CA, as Velero users set it
// up: the bundle in a Secret named by spec.objectStorage.caCertRef. The S3
// server (versitygw) sits behind a TLS proxy whose certificate only that
// bundle trusts.
func TestBackupStorageLocationTrustsItsCACertRef(t *testing.T) {
	srv := s3server.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	// The refused handshakes are the point of the test, not news.
	proxy.Config.ErrorLog = log.New(io.Discard, "", 0)
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}))

	ns := namespace(t)
	create(t, secret(ns, "store", map[string]string{"cloud": string(srv.CredentialsFile())}))
	create(t, secret(ns, "store-ca", map[string]string{"ca.crt": caPEM}))
	bucket := srv.NewBucket(t)
	location := func(name string, change func(*v1.ObjectStorageLocation)) *v1.BackupStorageLocation {
		config := srv.BSLConfig()
		config["s3Url"] = proxy.URL
		st := &v1.ObjectStorageLocation{Bucket: bucket}
		change(st)
		return &v1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.BackupStorageLocationSpec{
				Provider: "aws", Config: config, Credential: selector("store", "cloud"),
				StorageType: v1.StorageType{ObjectStorage: st},
			},
		}
	}
	r := &Resolver{Client: kube, SecretReader: kube, Namespace: ns}
	list := func(bsl *v1.BackupStorageLocation) error {
		ctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
		defer cancel()
		store, err := r.Open(ctx, bsl)
		if err != nil {
			return err
		}
		_, err = store.ListBackups(ctx)
		return err
	}

	for _, tc := range []struct {
		name   string
		change func(*v1.ObjectStorageLocation)
		want   string // "" for success, else part of the error
	}{
		{"caCertRef", func(st *v1.ObjectStorageLocation) { st.CACertRef = selector("store-ca", "ca.crt") }, ""},
		{"inline caCert", func(st *v1.ObjectStorageLocation) { st.CACert = []byte(caPEM) }, ""},
		{"no CA", func(*v1.ObjectStorageLocation) {}, "certificate"},
		{"missing secret", func(st *v1.ObjectStorageLocation) { st.CACertRef = selector("no-such-secret", "ca.crt") },
			`spec.objectStorage.caCertRef names secret "no-such-secret"`},
		{"missing key", func(st *v1.ObjectStorageLocation) { st.CACertRef = selector("store-ca", "tls.crt") },
			`no key "tls.crt" (spec.objectStorage.caCertRef.key)`},
		{"both", func(st *v1.ObjectStorageLocation) {
			st.CACertRef = selector("store-ca", "ca.crt")
			st.CACert = []byte(caPEM)
		}, "caCert and spec.objectStorage.caCertRef are both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := list(location("loc", tc.change))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("listing the store: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("listing the store: error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
