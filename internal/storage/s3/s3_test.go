package s3

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/storagetest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// srv is one versitygw shared by the package's tests; nil with -short.
var srv *s3server.Server

func TestMain(m *testing.M) { s3server.RunShared(m, &srv) }

func needServer(t *testing.T) {
	t.Helper()
	if srv == nil {
		t.Skip("needs the S3 server, which -short does not start")
	}
}

func openStore(t *testing.T, config map[string]string, credentials []byte) *Store {
	t.Helper()
	s, err := New(t.Context(), config, credentials)
	if err != nil {
		t.Fatalf("New(%v): %v", config, err)
	}
	return s
}

func withConfig(extra map[string]string) map[string]string {
	c := srv.BSLConfig()
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func TestConformance(t *testing.T) {
	needServer(t)
	storagetest.Run(t, func(t *testing.T) (storage.ObjectStore, string) {
		return openStore(t, srv.BSLConfig(), srv.CredentialsFile()), srv.NewBucket(t)
	})
}

// Many S3-compatible servers reject checksum headers; checksumAlgorithm ""
// must turn them off without breaking anything else.
func TestConformanceWithoutChecksums(t *testing.T) {
	needServer(t)
	storagetest.Run(t, func(t *testing.T) (storage.ObjectStore, string) {
		return openStore(t, withConfig(map[string]string{KeyChecksumAlgorithm: ""}), srv.CredentialsFile()), srv.NewBucket(t)
	})
}

func TestUnfinishedUploads(t *testing.T) {
	needServer(t)
	storagetest.RunUnfinishedUploads(t, func(t *testing.T) (storage.ObjectStore, string) {
		return openStore(t, srv.BSLConfig(), srv.CredentialsFile()), srv.NewBucket(t)
	})
}

// A process killed in the middle of a multipart upload leaves it started,
// with its parts stored, and never completed or aborted: what the server
// holds looks exactly like this.
func TestRemoveUnfinishedUploadsOfAKilledWriter(t *testing.T) {
	needServer(t)
	s := openStore(t, srv.BSLConfig(), srv.CredentialsFile())
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	start := func(key string) string {
		t.Helper()
		out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("CreateMultipartUpload(%s): %v", key, err)
		}
		if _, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key),
			UploadId: out.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("the first part")}); err != nil {
			t.Fatalf("UploadPart(%s): %v", key, err)
		}
		return aws.ToString(out.UploadId)
	}
	// Two uploads of one key (a retried upload, then the kill), one of a
	// neighbour's.
	first := start("lb/backups/b/b.tar.gz")
	start("lb/backups/b/b.tar.gz")
	start("lb/backups/bc/bc.tar.gz")
	if err := s.PutObject(ctx, bucket, "lb/backups/b/velero-backup.json", strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}

	want := []string{"lb/backups/b/b.tar.gz", "lb/backups/b/b.tar.gz"}
	if got, err := s.ListUnfinishedUploads(ctx, bucket, "lb/backups/b/"); err != nil || !slices.Equal(got, want) {
		t.Errorf("ListUnfinishedUploads = %q, %v; want %q", got, err, want)
	}
	if got, err := s.RemoveUnfinishedUploads(ctx, bucket, "lb/backups/b/"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("RemoveUnfinishedUploads = %q, %v; want %q", got, err, want)
	}
	left, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Uploads) != 1 || aws.ToString(left.Uploads[0].Key) != "lb/backups/bc/bc.tar.gz" {
		var keys []string
		for _, u := range left.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		t.Errorf("uploads left in the bucket: %q; want only the neighbour's", keys)
	}
	// Aborted for real: its parts are gone and it takes no more.
	_, err = s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("lb/backups/b/b.tar.gz"),
		UploadId: aws.String(first), PartNumber: aws.Int32(2), Body: strings.NewReader("more")})
	if !isNoSuchUpload(err) {
		t.Errorf("UploadPart to an aborted upload: error %v, want NoSuchUpload", err)
	}
	if ok, err := s.ObjectExists(ctx, bucket, "lb/backups/b/velero-backup.json"); err != nil || !ok {
		t.Errorf("the finished object next to the uploads: exists %v, %v", ok, err)
	}
}

func TestEachChecksumAlgorithm(t *testing.T) {
	needServer(t)
	for _, alg := range checksumAlgorithms {
		t.Run(alg, func(t *testing.T) {
			s := openStore(t, withConfig(map[string]string{KeyChecksumAlgorithm: alg}), srv.CredentialsFile())
			bucket := srv.NewBucket(t)
			// Above the multipart threshold, so parts carry checksums too.
			body := strings.Repeat("0123456789abcdef", (uploadPartSize+1024)/16)
			if err := s.PutObject(t.Context(), bucket, "k", strings.NewReader(body)); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			rc, err := s.GetObject(t.Context(), bucket, "k")
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if string(got) != body {
				t.Errorf("read back %d bytes that differ from the %d written", len(got), len(body))
			}

			// The server keeps the checksum the client sent; with "" the
			// client sends none.
			if err := s.PutObject(t.Context(), bucket, "small", strings.NewReader("hello")); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			head, err := s.client.HeadObject(t.Context(), &s3.HeadObjectInput{
				Bucket: aws.String(bucket), Key: aws.String("small"), ChecksumMode: types.ChecksumModeEnabled,
			})
			if err != nil {
				t.Fatalf("HeadObject: %v", err)
			}
			sent := map[string]string{
				"CRC32":  aws.ToString(head.ChecksumCRC32),
				"CRC32C": aws.ToString(head.ChecksumCRC32C),
				"SHA1":   aws.ToString(head.ChecksumSHA1),
				"SHA256": aws.ToString(head.ChecksumSHA256),
			}
			for a, sum := range sent {
				if (a == alg) != (sum != "") {
					t.Errorf("stored %s checksum = %q with checksumAlgorithm %q", a, sum, alg)
				}
			}
		})
	}
}

func TestCredentialsFileNotLeftOnDisk(t *testing.T) {
	needServer(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s := openStore(t, srv.BSLConfig(), srv.CredentialsFile())
	if _, err := New(t.Context(), withConfig(map[string]string{KeyProfile: "absent"}), srv.CredentialsFile()); err == nil {
		t.Errorf("New with a profile missing from the credentials succeeded")
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("temporary directory holds %v after New, want nothing", entries)
	}
	// The credentials still work after their file is gone.
	if _, err := s.ListObjects(t.Context(), srv.NewBucket(t), ""); err != nil {
		t.Errorf("ListObjects after the credentials file was removed: %v", err)
	}
}

func TestProfileSelectsCredentials(t *testing.T) {
	needServer(t)
	// The default profile has the right key id and a wrong secret: a bad
	// signature. (versitygw answers HEAD with an unknown key id by 404,
	// which would hide the difference between the profiles.)
	creds := fmt.Sprintf("[default]\naws_access_key_id = %[1]s\naws_secret_access_key = wrong\n\n[backup]\naws_access_key_id = %[1]s\naws_secret_access_key = %[2]s\n", srv.AccessKey, srv.SecretKey)
	bucket := srv.NewBucket(t)

	good := openStore(t, withConfig(map[string]string{KeyProfile: "backup"}), []byte(creds))
	if _, err := good.ListObjects(t.Context(), bucket, ""); err != nil {
		t.Errorf("profile backup: ListObjects: %v", err)
	}
	bad := openStore(t, srv.BSLConfig(), []byte(creds))
	if _, err := bad.ListObjects(t.Context(), bucket, ""); err == nil {
		t.Errorf("default profile (wrong keys): ListObjects succeeded, want access denied")
	}
	// Wrong credentials must not look like a missing object.
	if _, err := bad.ObjectExists(t.Context(), bucket, "k"); err == nil {
		t.Errorf("wrong keys: ObjectExists succeeded, want an error")
	}
	if _, err := bad.GetObject(t.Context(), bucket, "k"); err == nil || errors.Is(err, storage.ErrNotFound) {
		t.Errorf("wrong keys: GetObject error = %v, want a non-NotFound error", err)
	}
}

func TestMissingProfileFailsAtOpen(t *testing.T) {
	needServer(t)
	_, err := New(t.Context(), withConfig(map[string]string{KeyProfile: "nope"}), srv.CredentialsFile())
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("New error = %v, want one naming profile \"nope\"", err)
	}
}

func TestPublicURLSignsForPublicEndpoint(t *testing.T) {
	needServer(t)
	s := openStore(t, withConfig(map[string]string{KeyPublicURL: "https://backups.example.com:9443"}), srv.CredentialsFile())
	raw, err := s.CreateSignedURL(t.Context(), "bucket", "backups/b1/b1-logs.gz", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "backups.example.com:9443" || u.Path != "/bucket/backups/b1/b1-logs.gz" {
		t.Errorf("signed URL = %s, want https://backups.example.com:9443/bucket/backups/b1/b1-logs.gz?...", raw)
	}
	if got := u.Query().Get("X-Amz-Expires"); got != "600" {
		t.Errorf("X-Amz-Expires = %q, want 600", got)
	}
}

// TestTLSSettings puts a TLS proxy with a self-signed certificate in front
// of the server: the store must refuse it by default and accept it with
// insecureSkipTLSVerify or with the certificate as caCert.
func TestTLSSettings(t *testing.T) {
	needServer(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	// The refused handshakes are the point of the test, not news.
	proxy.Config.ErrorLog = log.New(io.Discard, "", 0)
	proxy.StartTLS()
	defer proxy.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}))
	bucket := srv.NewBucket(t)

	for _, tc := range []struct {
		name   string
		extra  map[string]string
		wantOK bool
	}{
		{"default", nil, false},
		{"insecureSkipTLSVerify", map[string]string{KeyInsecureSkipTLSVerify: "true"}, true},
		{"caCert", map[string]string{KeyCACert: caPEM}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := withConfig(tc.extra)
			config[KeyS3URL] = proxy.URL
			s := openStore(t, config, srv.CredentialsFile())
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := s.ListObjects(ctx, bucket, "")
			if tc.wantOK && err != nil {
				t.Errorf("ListObjects through TLS: %v", err)
			}
			if !tc.wantOK && (err == nil || !strings.Contains(err.Error(), "certificate")) {
				t.Errorf("ListObjects through an untrusted certificate: error = %v, want a certificate error", err)
			}
		})
	}
}

func TestRegion(t *testing.T) {
	// Keep the developer's AWS settings out of the answer.
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	creds := []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")

	region := func(t *testing.T, config map[string]string) string {
		t.Helper()
		s := openStore(t, config, creds)
		return s.client.Options().Region
	}
	if got := region(t, map[string]string{KeyRegion: "eu-west-1"}); got != "eu-west-1" {
		t.Errorf("explicit region: client region = %q", got)
	}
	if got := region(t, map[string]string{KeyS3URL: "http://127.0.0.1:1"}); got != "us-east-1" {
		t.Errorf("s3Url without region: client region = %q, want us-east-1", got)
	}
	if _, err := New(t.Context(), map[string]string{}, creds); err == nil || !strings.Contains(err.Error(), `config key "region" is required`) {
		t.Errorf("no region anywhere: error = %v, want region required", err)
	}
	t.Setenv("AWS_REGION", "ap-south-2")
	if got := region(t, map[string]string{}); got != "ap-south-2" {
		t.Errorf("region from the environment: client region = %q, want ap-south-2", got)
	}
	regionCreds := []byte("[profile withregion]\nregion = sa-east-1\naws_access_key_id = a\naws_secret_access_key = b\n")
	t.Setenv("AWS_REGION", "")
	s, err := New(t.Context(), map[string]string{KeyProfile: "withregion"}, regionCreds)
	if err != nil {
		t.Fatalf("New with a config-format profile: %v", err)
	}
	if got := s.client.Options().Region; got != "sa-east-1" {
		t.Errorf("region from the credentials' profile: client region = %q, want sa-east-1", got)
	}
}

func TestDiscoverBucketRegion(t *testing.T) {
	var gotAuth []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/denied-bucket":
			// What S3 answers an unsigned HEAD on a bucket that exists.
			w.Header().Set("X-Amz-Bucket-Region", "eu-west-3")
			w.WriteHeader(http.StatusForbidden)
		case "/public-bucket":
			w.Header().Set("X-Amz-Bucket-Region", "ca-central-1")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer fake.Close()
	for bucket, want := range map[string]string{"denied-bucket": "eu-west-3", "public-bucket": "ca-central-1"} {
		got, err := discoverBucketRegion(t.Context(), aws.Config{}, bucket, fake.URL)
		if err != nil || got != want {
			t.Errorf("discoverBucketRegion(%s) = %q, %v; want %q", bucket, got, err, want)
		}
	}
	_, err := discoverBucketRegion(t.Context(), aws.Config{}, "no-such-bucket", fake.URL)
	if err == nil || !strings.Contains(err.Error(), `set config key "region"`) {
		t.Errorf("discoverBucketRegion of a missing bucket: error = %v, want advice to set region", err)
	}
	for _, a := range gotAuth {
		if a != "" {
			t.Errorf("discovery request was signed (%q); it must not need credentials", a)
		}
	}
}

func TestParseConfig(t *testing.T) {
	s, err := parseConfig(map[string]string{KeyS3ForcePathStyle: "true", KeyInsecureSkipTLSVerify: "false", "bucket": "b", "prefix": "p"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.forcePathStyle || s.insecureSkipTLSVerify || s.profile != "default" || s.profileSet || s.checksumAlgorithm != "CRC32" || s.bucket != "b" {
		t.Errorf("parseConfig = %+v", s)
	}
	for name, tc := range map[string]struct {
		config map[string]string
		want   string
	}{
		"bad checksum":  {map[string]string{KeyChecksumAlgorithm: "MD5"}, `config key "checksumAlgorithm": unsupported value "MD5"`},
		"bad s3Url":     {map[string]string{KeyS3URL: "minio:9000"}, `config key "s3Url": invalid URL "minio:9000"`},
		"bad publicUrl": {map[string]string{KeyPublicURL: "ftp://x"}, `config key "publicUrl": invalid URL`},
		"bad insecure":  {map[string]string{KeyInsecureSkipTLSVerify: "yes"}, `config key "insecureSkipTLSVerify": invalid boolean "yes"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseConfig(%v) error = %v, want it to contain %q", tc.config, err, tc.want)
			}
		})
	}
	if _, err := New(t.Context(), map[string]string{KeyRegion: "x", KeyCACert: "not a certificate"}, []byte("[default]\naws_access_key_id=a\naws_secret_access_key=b\n")); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("New with a garbage caCert: error = %v, want no PEM certificate", err)
	}
}
