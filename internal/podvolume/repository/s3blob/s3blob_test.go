package s3blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/kopia/kopia/lifeboatsuite"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	kopias3 "github.com/kopia/kopia/repo/blob/s3"
	"github.com/kopia/kopia/repo/content"
	"github.com/kopia/kopia/repo/object"

	s3store "github.com/lifeboat-io/lifeboat/internal/storage/s3"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// srv is one versitygw over plain HTTP for the package's tests; nil with
// -short.
var srv *s3server.Server

func TestMain(m *testing.M) { s3server.RunShared(m, &srv) }

func needServer(t testing.TB) {
	t.Helper()
	if srv == nil {
		t.Skip("needs the S3 server, which -short does not start")
	}
}

var prefixes atomic.Int64

// options points at a fresh bucket of server and a prefix like Velero's.
func options(t testing.TB, server *s3server.Server) *Options {
	t.Helper()
	cfg := server.BSLConfig()
	if server.CACert != nil {
		cfg[s3store.KeyCACert] = string(server.CACert)
	}
	return &Options{
		Bucket:      server.NewBucket(t),
		Prefix:      fmt.Sprintf("velero/kopia/ns-%d/", prefixes.Add(1)),
		Config:      cfg,
		Credentials: server.CredentialsFile(),
	}
}

func open(t testing.TB, opt *Options) blob.Storage {
	t.Helper()
	st, err := New(t.Context(), opt, false)
	if err != nil {
		t.Fatalf("New(%+v): %v", opt, err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// kopiaS3 opens kopia's own (minio-based) s3 storage, what Velero uses, on
// the same bucket and prefix.
func kopiaS3(t testing.TB, opt *Options) blob.Storage {
	t.Helper()
	cfg := map[string]string{"bucket": opt.Bucket}
	for k, v := range opt.Config {
		cfg[k] = v
	}
	conn, err := s3store.ResolveConnection(t.Context(), cfg, opt.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kopias3.New(t.Context(), &kopias3.Options{
		BucketName:      opt.Bucket,
		Prefix:          opt.Prefix,
		Endpoint:        conn.Endpoint,
		DoNotUseTLS:     !conn.UseTLS,
		RootCA:          conn.CACert,
		AccessKeyID:     conn.AccessKeyID,
		SecretAccessKey: conn.SecretAccessKey,
		Region:          conn.Region,
	}, false)
	if err != nil {
		t.Fatalf("kopia's s3.New: %v", err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// kopia's own conformance tests, over HTTP and over TLS (UNSIGNED-PAYLOAD,
// the server's own CA given as the location's caCert).
func TestKopiaConformance(t *testing.T) {
	needServer(t)
	servers := map[string]*s3server.Server{"http": srv, "tls": s3server.Start(t, s3server.WithTLS())}
	for name, server := range servers {
		t.Run(name, func(t *testing.T) {
			t.Run("VerifyStorage", func(t *testing.T) {
				lifeboatsuite.VerifyStorage(t.Context(), t, open(t, options(t, server)), blob.PutOptions{})
			})
			t.Run("ConnectionInfoRoundTrips", func(t *testing.T) {
				lifeboatsuite.AssertConnectionInfoRoundTrips(t.Context(), t, open(t, options(t, server)))
			})
			t.Run("ConcurrentAccess", func(t *testing.T) {
				// kopia's own s3 tests' parameters.
				lifeboatsuite.VerifyConcurrentAccess(t, open(t, options(t, server)), lifeboatsuite.ConcurrentAccessOptions{
					NumBlobs: 32, Getters: 4, Putters: 4, Deleters: 4, Listers: 4, Iterations: 50,
					RangeGetPercentage: 10, NonExistentListPrefixPercentage: 10,
				})
			})
		})
	}
	// For servers that reject checksum headers.
	t.Run("http-without-checksums/VerifyStorage", func(t *testing.T) {
		opt := options(t, srv)
		opt.Config[s3store.KeyChecksumAlgorithm] = ""
		lifeboatsuite.VerifyStorage(t.Context(), t, open(t, opt), blob.PutOptions{})
	})
	t.Run("ValidateProvider", func(t *testing.T) {
		if err := lifeboatsuite.ValidateProvider(t.Context(), open(t, options(t, srv))); err != nil {
			t.Fatalf("kopia's provider validation: %v", err)
		}
	})
}

// A blob is stored with the checksum the location asks for: CRC32 unless
// it names another or turns them off (kopia's s3 storage sends none, but
// Content-MD5).
func TestChecksums(t *testing.T) {
	needServer(t)
	ctx := t.Context()
	for alg, want := range map[string]string{"(default)": "CRC32", "CRC32C": "CRC32C", "SHA256": "SHA256", "": ""} {
		t.Run(alg, func(t *testing.T) {
			opt := options(t, srv)
			if alg != "(default)" {
				opt.Config[s3store.KeyChecksumAlgorithm] = alg
			}
			if err := open(t, opt).PutBlob(ctx, "p1", sliceBytes("some bytes"), blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			raw, err := s3store.NewClient(ctx, opt.Config, opt.Credentials)
			if err != nil {
				t.Fatal(err)
			}
			out, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(opt.Bucket), Key: aws.String(opt.Prefix + "p1"), ChecksumMode: types.ChecksumModeEnabled})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*string{"CRC32": out.ChecksumCRC32, "CRC32C": out.ChecksumCRC32C, "SHA256": out.ChecksumSHA256, "SHA1": out.ChecksumSHA1}
			for name, v := range got {
				if (name == want) != (v != nil) {
					t.Errorf("checksum %s stored: %v, want only %q", name, aws.ToString(v), want)
				}
			}
		})
	}
}

// What the storage refuses, it refuses with kopia's sentinels (which its
// callers and retry wrapper tell apart) and a message naming what.
func TestRefused(t *testing.T) {
	needServer(t)
	ctx := t.Context()
	st := open(t, options(t, srv))
	data := blob.Bytes(sliceBytes("x"))
	err := st.PutBlob(ctx, "p1", data, blob.PutOptions{RetentionMode: blob.Governance, RetentionPeriod: time.Hour})
	if !errors.Is(err, blob.ErrUnsupportedPutBlobOption) || !strings.Contains(err.Error(), "object lock") {
		t.Errorf("PutBlob with retention: %v, want ErrUnsupportedPutBlobOption naming object lock", err)
	}
	if err := st.PutBlob(ctx, "p1", data, blob.PutOptions{DoNotRecreate: true}); !errors.Is(err, blob.ErrUnsupportedPutBlobOption) {
		t.Errorf("PutBlob with DoNotRecreate: %v, want ErrUnsupportedPutBlobOption", err)
	}
	if err := st.PutBlob(ctx, "p1", data, blob.PutOptions{SetModTime: time.Now()}); !errors.Is(err, blob.ErrSetTimeUnsupported) {
		t.Errorf("PutBlob with SetModTime: %v, want ErrSetTimeUnsupported", err)
	}
	if err := st.ExtendBlobRetention(ctx, "p1", blob.ExtendOptions{RetentionMode: blob.Compliance, RetentionPeriod: time.Hour}); !errors.Is(err, blob.ErrUnsupportedObjectLock) {
		t.Errorf("ExtendBlobRetention: %v, want ErrUnsupportedObjectLock", err)
	}
	if _, err := st.GetCapacity(ctx); !errors.Is(err, blob.ErrNotAVolume) {
		t.Errorf("GetCapacity: %v, want ErrNotAVolume", err)
	}
	// None of them wrote anything.
	if _, err := st.GetMetadata(ctx, "p1"); !errors.Is(err, blob.ErrBlobNotFound) {
		t.Errorf("a refused put stored the blob: %v", err)
	}
	if st.IsReadOnly() || st.FlushCaches(ctx) != nil {
		t.Error("IsReadOnly or FlushCaches")
	}
	if got := st.DisplayName(); !strings.Contains(got, srv.Endpoint) {
		t.Errorf("DisplayName %q does not name the endpoint %s", got, srv.Endpoint)
	}
}

// A bucket that is not there is a wrong location, not a missing blob: a
// repository status check must not take it for an empty repository.
func TestMissingBucket(t *testing.T) {
	needServer(t)
	opt := options(t, srv)
	opt.Bucket = "no-such-bucket"
	st, err := New(t.Context(), opt, false)
	if err == nil {
		var out bytes.Buffer
		err = st.GetBlob(t.Context(), "kopia.repository", 0, -1, &outputBuffer{&out})
	}
	if err == nil || errors.Is(err, blob.ErrBlobNotFound) {
		t.Fatalf("opening a missing bucket: %v, want an error other than ErrBlobNotFound", err)
	}
}

// The objects in the bucket are the same whichever storage wrote them:
// keys, bodies, content type, no user metadata; each storage reads,
// ranges, lists and deletes the other's; kopia's .storageconfig is not a
// blob to either.
func TestSameObjectsAsKopiaS3(t *testing.T) {
	needServer(t)
	ctx := t.Context()
	opt := options(t, srv)
	ours, theirs := open(t, opt), kopiaS3(t, opt)
	raw, err := s3store.NewClient(ctx, opt.Config, opt.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)
	if err := ours.PutBlob(ctx, "pours", sliceBytes(payload), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := theirs.PutBlob(ctx, "ptheirs", sliceBytes(payload), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(opt.Bucket), Key: aws.String(opt.Prefix + ConfigName),
		Body: strings.NewReader(`{"blobOptions":[]}`)}); err != nil {
		t.Fatal(err)
	}
	head := func(id string) *s3.HeadObjectOutput {
		t.Helper()
		out, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(opt.Bucket), Key: aws.String(opt.Prefix + id)})
		if err != nil {
			t.Fatalf("HeadObject %s%s: %v", opt.Prefix, id, err)
		}
		return out
	}
	a, b := head("pours"), head("ptheirs")
	if aws.ToString(a.ContentType) != aws.ToString(b.ContentType) || aws.ToString(a.ContentType) != contentType ||
		aws.ToInt64(a.ContentLength) != aws.ToInt64(b.ContentLength) || len(a.Metadata) != len(b.Metadata) || len(a.Metadata) != 0 {
		t.Errorf("objects differ: ours type %q length %d metadata %v; kopia's type %q length %d metadata %v",
			aws.ToString(a.ContentType), aws.ToInt64(a.ContentLength), a.Metadata, aws.ToString(b.ContentType), aws.ToInt64(b.ContentLength), b.Metadata)
	}
	for name, st := range map[string]blob.Storage{"ours": ours, "kopia's": theirs} {
		for _, id := range []blob.ID{"pours", "ptheirs"} {
			var out bytes.Buffer
			if err := st.GetBlob(ctx, id, 0, -1, &outputBuffer{&out}); err != nil || !bytes.Equal(out.Bytes(), payload) {
				t.Errorf("%s storage reading %s: %v (%d bytes, equal %v)", name, id, err, out.Len(), bytes.Equal(out.Bytes(), payload))
			}
			if err := st.GetBlob(ctx, id, 1<<20, 100, &outputBuffer{&out}); err != nil || !bytes.Equal(out.Bytes(), payload[1<<20:1<<20+100]) {
				t.Errorf("%s storage reading a range of %s: %v", name, id, err)
			}
		}
		var listed []string
		if err := st.ListBlobs(ctx, "p", func(m blob.Metadata) error {
			listed = append(listed, fmt.Sprintf("%s:%d", m.BlobID, m.Length))
			if m.Timestamp.IsZero() || time.Since(m.Timestamp) > time.Hour {
				t.Errorf("%s storage lists %s with timestamp %v", name, m.BlobID, m.Timestamp)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("[pours:%d ptheirs:%d]", len(payload), len(payload))
		if fmt.Sprint(listed) != want {
			t.Errorf("%s storage lists %v, want %s", name, listed, want)
		}
		all, err := blob.ListAllBlobs(ctx, st, "")
		if err != nil || len(all) != 2 {
			t.Errorf("%s storage lists %v, %v without prefix; want the two blobs, not %s", name, all, err, ConfigName)
		}
	}
	if err := ours.DeleteBlob(ctx, "ptheirs"); err != nil {
		t.Fatal(err)
	}
	if _, err := theirs.GetMetadata(ctx, "ptheirs"); !errors.Is(err, blob.ErrBlobNotFound) {
		t.Errorf("kopia's storage after ours deleted its blob: %v, want ErrBlobNotFound", err)
	}
}

// A repository created and written through this storage opens and reads
// through kopia's own s3 storage (Velero's), and the other way round, on
// the same prefix; each reopens from its repository.config (the registry).
func TestRepositoryBothWays(t *testing.T) {
	needServer(t)
	opt := options(t, srv)
	data := make([]byte, 5<<20)
	rand.Read(data)
	for _, tc := range []struct {
		name          string
		writer, reade func(testing.TB, *Options) blob.Storage
	}{
		{"lifeboat writes, kopia's s3 reads", open, kopiaS3},
		{"kopia's s3 writes, lifeboat reads", kopiaS3, open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := *opt
			o.Prefix = fmt.Sprintf("velero/kopia/both-%d/", prefixes.Add(1))
			ctx := t.Context()
			if err := repo.Initialize(ctx, tc.writer(t, &o), &repo.NewRepositoryOptions{}, "pw"); err != nil {
				t.Fatal(err)
			}
			rep := connect(t, tc.writer(t, &o))
			var oid object.ID
			err := repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "test"}, func(ctx context.Context, w repo.RepositoryWriter) error {
				ow := w.NewObjectWriter(ctx, object.WriterOptions{Description: "test"})
				defer ow.Close()
				if _, err := ow.Write(data); err != nil {
					return err
				}
				var err error
				oid, err = ow.Result()
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			rep.Close(ctx)

			rep = connect(t, tc.reade(t, &o))
			defer rep.Close(ctx)
			r, err := rep.OpenObject(ctx, oid)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("reading the object back: %v (%d bytes, equal %v)", err, len(got), bytes.Equal(got, data))
			}
		})
	}
}

func connect(t *testing.T, st blob.Storage) repo.Repository {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	config := filepath.Join(dir, "repository.config")
	if err := repo.Connect(ctx, config, st, "pw", &repo.ConnectOptions{
		CachingOptions: content.CachingOptions{CacheDirectory: filepath.Join(dir, "cache")},
	}); err != nil {
		t.Fatalf("connect through %s: %v", st.DisplayName(), err)
	}
	rep, err := repo.Open(ctx, config, "pw", &repo.Options{})
	if err != nil {
		t.Fatalf("open through %s: %v", st.DisplayName(), err)
	}
	return rep
}

// sliceBytes is blob.Bytes over a slice.
type sliceBytes []byte

func (s sliceBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(s)
	return int64(n), err
}

func (s sliceBytes) Length() int { return len(s) }

func (s sliceBytes) Reader() io.ReadSeekCloser { return nopCloser{bytes.NewReader(s)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
