package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/zstd"

	"github.com/lifeboat-io/lifeboat/bench/internal/fstree"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// The floor's object, read back, holds every file of the tree byte for
// byte: what it is timed doing is the whole job.
func TestFloorStoresTheTreeCompressedOverTLS(t *testing.T) {
	srv := s3server.Start(t, s3server.WithTLS())
	bucket := srv.NewBucket(t)
	dir := t.TempDir()
	st, err := fstree.Generate(dir, 40<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("large/data-00.bin", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{dir: dir, endpoint: srv.Endpoint, region: s3server.Region, bucket: bucket, key: "run1/volume.tar.zst", caFile: ca,
		accessKey: srv.AccessKey, secretKey: srv.SecretKey, level: "default", partSize: 5 << 20, concurrency: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.files != st.Files || res.bytes != st.Bytes {
		t.Errorf("floor read %d files, %d bytes; the tree has %d, %d", res.files, res.bytes, st.Files, st.Bytes)
	}
	if r := float64(res.storedBytes) / float64(res.bytes); r < 0.4 || r > 0.85 {
		t.Errorf("stored %d of %d bytes (%.2f): not compressed as zstd would", res.storedBytes, res.bytes, r)
	}

	client, err := newClient(o)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if aws.ToInt64(obj.ContentLength) != res.storedBytes {
		t.Errorf("object holds %d bytes, floor reported %d", aws.ToInt64(obj.ContentLength), res.storedBytes)
	}
	dec, err := zstd.NewReader(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got := map[string][32]byte{}
	tr := tar.NewReader(dec)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				t.Fatal(err)
			}
			got[hdr.Name] = [32]byte(h.Sum(nil))
		case tar.TypeSymlink:
			if hdr.Name != "link" || hdr.Linkname != "large/data-00.bin" {
				t.Errorf("symlink %s -> %s, want link -> large/data-00.bin", hdr.Name, hdr.Linkname)
			}
		}
	}
	want := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		want++
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if got[filepath.ToSlash(rel)] != sha256.Sum256(data) {
			t.Errorf("%s: missing or different in the stored archive", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Errorf("archive holds %d files, the tree %d", len(got), want)
	}
}

func TestFloorFailsOnWhatItCannotDo(t *testing.T) {
	srv := s3server.Start(t)
	bucket := srv.NewBucket(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := options{dir: dir, endpoint: srv.Endpoint, region: s3server.Region, bucket: bucket, key: "k",
		accessKey: srv.AccessKey, secretKey: srv.SecretKey, level: "default", partSize: 5 << 20, concurrency: 2}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, c := range map[string]struct {
		change func(*options)
		want   string
	}{
		"unknown level":      {func(o *options) { o.level = "turbo" }, `unknown -level "turbo"`},
		"wrong secret":       {func(o *options) { o.secretKey = "wrong" }, "uploading s3://"},
		"missing bucket":     {func(o *options) { o.bucket = "no-such-bucket" }, "uploading s3://no-such-bucket/k"},
		"missing directory":  {func(o *options) { o.dir = filepath.Join(dir, "gone") }, "archiving"},
		"missing credential": {func(o *options) { o.accessKey = "" }, "AWS_ACCESS_KEY_ID"},
	} {
		t.Run(name, func(t *testing.T) {
			o := base
			c.change(&o)
			if _, err := run(ctx, o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
