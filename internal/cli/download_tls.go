package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// tlsFlags are Velero's --cacert and --insecure-skip-tls-verify: how the
// client checks the object store's certificate when it follows a
// DownloadRequest's signed URL. The server's own trust does not apply here;
// the URL is fetched from wherever the CLI runs.
type tlsFlags struct {
	caCertFile string
	insecure   bool
}

func bindTLSFlags(fl *pflag.FlagSet, f *Factory) *tlsFlags {
	t := &tlsFlags{}
	fl.StringVar(&t.caCertFile, "cacert", f.CACertFile,
		"file with the CA certificates to verify the object store's TLS certificate with (default: the cacert of Velero's client config, else the storage location's caCertRef or caCert)")
	fl.BoolVar(&t.insecure, "insecure-skip-tls-verify", false,
		"do not verify the object store's TLS certificate: anyone on the network path can read and change the download; for tests only")
	return t
}

// storeDownloader is a downloader whose HTTP client trusts what tlsFlags
// and the backup storage location say. A --cacert file wins; without one,
// the location's caCertRef Secret, else its inline caCert, is used, as
// Velero's CLI does. A location whose CA cannot be read is a warning on
// warn, since the store may not need it.
func (f *Factory) storeDownloader(ctx context.Context, c client.Client, timeout time.Duration, t *tlsFlags, location string, warn io.Writer) (*downloader, error) {
	d := f.downloader(c, timeout)
	var caPEM []byte
	source := ""
	if t != nil && t.caCertFile != "" {
		data, err := os.ReadFile(t.caCertFile)
		if err != nil {
			return nil, fmt.Errorf("reading --cacert: %w", err)
		}
		caPEM, source = data, "--cacert "+t.caCertFile
	} else if location != "" {
		data, err := locationCA(ctx, c, f.Namespace, location)
		if err != nil {
			fmt.Fprintf(warn, "Warning: %v; going on with the system's CA certificates\n", err)
		}
		caPEM, source = data, "the caCert of backup storage location "+location
	}
	insecure := t != nil && t.insecure
	if len(caPEM) == 0 && !insecure {
		return d, nil
	}
	hc, err := withTLS(d.http, caPEM, insecure)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	d.http = hc
	return d, nil
}

// locationCA reads a location's CA bundle: caCertRef first, then caCert.
// A missing location has none.
func locationCA(ctx context.Context, c client.Client, namespace, name string) ([]byte, error) {
	loc := &v1.BackupStorageLocation{}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, loc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading backup storage location %q for its CA certificates: %w", name, err)
	}
	st := loc.Spec.ObjectStorage
	if st == nil {
		return nil, nil
	}
	if ref := st.CACertRef; ref != nil {
		secret := &corev1.Secret{}
		if err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, secret); err != nil {
			return nil, fmt.Errorf("reading Secret %q of the caCertRef of backup storage location %q: %w", ref.Name, name, err)
		}
		data, ok := secret.Data[ref.Key]
		if !ok || len(data) == 0 {
			return nil, fmt.Errorf("secret %q has no key %q, named by the caCertRef of backup storage location %q", ref.Name, ref.Key, name)
		}
		return data, nil
	}
	return st.CACert, nil
}

// locationOfBackup is the storage location of a backup; "" when the backup
// is gone (a restore may outlive it) or names none.
func locationOfBackup(ctx context.Context, c client.Client, namespace, name string) string {
	b := &v1.Backup{}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, b); err != nil {
		return ""
	}
	return b.Spec.StorageLocation
}

// withTLS returns a copy of hc that trusts the system's CAs plus caPEM, or
// skips verification.
func withTLS(hc *http.Client, caPEM []byte, insecure bool) (*http.Client, error) {
	base, ok := hc.Transport.(*http.Transport)
	if !ok || base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		cfg = tr.TLSClientConfig.Clone()
	}
	if len(caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no PEM certificate found in the CA bundle")
		}
		cfg.RootCAs = pool
	}
	cfg.InsecureSkipVerify = insecure //nolint:gosec // the user asked for it with --insecure-skip-tls-verify
	tr.TLSClientConfig = cfg
	out := *hc
	out.Transport = tr
	return &out, nil
}
