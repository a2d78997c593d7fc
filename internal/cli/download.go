package cli

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// defaultDownloadTimeout is how long a client waits for the server to answer
// a DownloadRequest; a running server answers in well under a second.
const defaultDownloadTimeout = time.Minute

// errFileNotFound says the server answered but the store has no such file,
// e.g. the resource list of a backup that has not finished.
var errFileNotFound = errors.New("file not found in object storage")

// downloader reads one file of a backup through a DownloadRequest: the
// server (the only one holding the store's credentials) answers with a URL,
// and the client reads the URL itself.
type downloader struct {
	client    client.Client
	http      *http.Client
	namespace string
	timeout   time.Duration
	poll      time.Duration
}

func (f *Factory) downloader(c client.Client, timeout time.Duration) *downloader {
	if timeout <= 0 {
		timeout = defaultDownloadTimeout
	}
	return &downloader{client: c, http: f.httpClient(), namespace: f.Namespace, timeout: timeout, poll: f.pollInterval()}
}

// open returns the file's content as stored (still gzipped for gzipped
// files). Closing the reader deletes the DownloadRequest.
func (d *downloader) open(ctx context.Context, kind v1.DownloadTargetKind, name string) (io.ReadCloser, error) {
	req := &v1.DownloadRequest{
		ObjectMeta: metav1.ObjectMeta{
			// Unique per call, so parallel CLIs never share a request.
			Name:      requestName(name),
			Namespace: d.namespace,
		},
		Spec: v1.DownloadRequestSpec{Target: v1.DownloadTarget{Kind: kind, Name: name}},
	}
	if err := d.create(ctx, req); err != nil {
		return nil, err
	}
	rc, err := d.fetch(ctx, req)
	if err != nil {
		d.delete(ctx, req)
		return nil, err
	}
	return &cleanupReader{ReadCloser: rc, cleanup: func() { d.delete(ctx, req) }}, nil
}

func (d *downloader) create(ctx context.Context, req *v1.DownloadRequest) error {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := d.client.Create(callCtx, req); err != nil {
		return fmt.Errorf("creating DownloadRequest for the %s of %q: %w", req.Spec.Target.Kind, req.Spec.Target.Name, err)
	}
	return nil
}

func (d *downloader) fetch(ctx context.Context, req *v1.DownloadRequest) (io.ReadCloser, error) {
	target := req.Spec.Target
	rawURL, err := d.waitURL(ctx, req)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("the server answered DownloadRequest %s with an unparseable URL: %w", req.Name, err)
	}
	switch u.Scheme {
	case "file":
		// The filesystem store answers with a path on the server's machine;
		// it is readable here when the CLI runs on that machine (or shares
		// the mount).
		f, err := os.Open(u.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s of %s %q: %w (%s; a filesystem store can only be read on the server's machine)",
				target.Kind, targetOwner(target.Kind), target.Name, errFileNotFound, u.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("opening the %s of %s %q: %w", target.Kind, targetOwner(target.Kind), target.Name, err)
		}
		return f, nil
	case "http", "https":
		return d.get(ctx, target, u)
	default:
		return nil, fmt.Errorf("the server answered DownloadRequest %s with a %q URL, which lifeboat cannot read", req.Name, u.Scheme)
	}
}

func (d *downloader) get(ctx context.Context, target v1.DownloadTarget, u *url.URL) (io.ReadCloser, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the request for the %s of %s %q: %w", target.Kind, targetOwner(target.Kind), target.Name, err)
	}
	resp, err := d.http.Do(hreq)
	if err != nil {
		// Signed URLs carry credentials in the query; keep them out of
		// error messages that end up in terminals and CI logs. %v, not %w:
		// a network error here is about the object store, and must not be
		// reported as an unreachable API server.
		return nil, fmt.Errorf("downloading the %s of %s %q from %s: %v", target.Kind, targetOwner(target.Kind), target.Name, redact(u), unwrapURLError(err)) //nolint:errorlint // %v on purpose, see above
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return resp.Body, nil
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		return nil, fmt.Errorf("%s of %s %q: %w", target.Kind, targetOwner(target.Kind), target.Name, errFileNotFound)
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("downloading the %s of %s %q from %s: HTTP %s: %s", target.Kind, targetOwner(target.Kind), target.Name, redact(u), resp.Status, strings.TrimSpace(string(body)))
	}
}

// waitURL polls until the server has processed the request.
func (d *downloader) waitURL(ctx context.Context, req *v1.DownloadRequest) (string, error) {
	deadline := time.Now().Add(d.timeout)
	key := client.ObjectKeyFromObject(req)
	for {
		cur := &v1.DownloadRequest{}
		callCtx, cancel := callCtx(ctx)
		err := d.client.Get(callCtx, key, cur)
		cancel()
		if err != nil {
			return "", fmt.Errorf("reading DownloadRequest %s: %w", req.Name, err)
		}
		if cur.Status.Phase == v1.DownloadRequestPhaseProcessed {
			if cur.Status.DownloadURL != "" {
				return cur.Status.DownloadURL, nil
			}
			// Processed without a URL: the server could not sign one; its
			// conditions say why.
			return "", fmt.Errorf("the server processed DownloadRequest %s but gave no URL%s", req.Name, conditionMessages(cur.Status.Conditions))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("DownloadRequest %s for the %s of %q was not processed within %s; is `lifeboat server` running for namespace %q?",
				req.Name, req.Spec.Target.Kind, req.Spec.Target.Name, d.timeout, d.namespace)
		}
		if err := sleep(ctx, d.poll); err != nil {
			return "", fmt.Errorf("waiting for DownloadRequest %s: %w", req.Name, err)
		}
	}
}

// delete removes the request even when ctx was cancelled by Ctrl-C, so an
// interrupted download leaves nothing behind.
func (d *downloader) delete(ctx context.Context, req *v1.DownloadRequest) {
	callCtx, cancel := callCtx(context.WithoutCancel(ctx))
	defer cancel()
	// Best effort: the server also deletes expired requests.
	_ = client.IgnoreNotFound(d.client.Delete(callCtx, req))
}

// targetOwner is what a download target belongs to, for messages.
func targetOwner(kind v1.DownloadTargetKind) string {
	if strings.HasPrefix(string(kind), "Restore") {
		return "restore"
	}
	return "backup"
}

// readGzipJSON decodes a gzipped JSON file (resource lists, results) into
// v; what names the file in errors, e.g. `resource list of backup "web"`.
func readGzipJSON(ctx context.Context, d *downloader, kind v1.DownloadTargetKind, name, what string, v any) error {
	rc, err := d.open(ctx, kind, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		return fmt.Errorf("reading the %s: %w", what, err)
	}
	defer gz.Close()
	if err := json.NewDecoder(gz).Decode(v); err != nil {
		return fmt.Errorf("decoding the %s: %w", what, err)
	}
	return nil
}

// copyGzipped writes a gzipped file (a log) to w as plain text; what names
// the file in errors, e.g. `log of backup "web"`.
func copyGzipped(ctx context.Context, d *downloader, kind v1.DownloadTargetKind, name, what string, w io.Writer) error {
	rc, err := d.open(ctx, kind, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		return fmt.Errorf("reading the %s: %w", what, err)
	}
	defer gz.Close()
	if _, err := io.Copy(w, gz); err != nil {
		return fmt.Errorf("reading the %s: %w", what, err)
	}
	return nil
}

type cleanupReader struct {
	io.ReadCloser
	cleanup func()
}

func (r *cleanupReader) Close() error {
	err := r.ReadCloser.Close()
	r.cleanup()
	return err
}

// requestName is "<backup>-<suffix>", cut so the whole stays a valid name.
func requestName(backup string) string {
	const suffixLen = 5
	const maxLen = 253
	if len(backup) > maxLen-suffixLen-1 {
		backup = backup[:maxLen-suffixLen-1]
	}
	return backup + "-" + utilrand.String(suffixLen)
}

func conditionMessages(conds []metav1.Condition) string {
	var msgs []string
	for _, c := range conds {
		if c.Message != "" {
			msgs = append(msgs, c.Type+": "+c.Message)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

func redact(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	c.User = nil
	return c.String()
}

// unwrapURLError strips net/http's url.Error, whose message repeats the
// full (signed) URL.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}
