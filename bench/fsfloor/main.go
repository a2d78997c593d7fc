// Command fsfloor is the file-system backup benchmark's yardstick: the
// least a backup of a volume's files into an S3 store can cost on a given
// machine and store. It walks a directory, reads every file, and writes
// them as one zstd-compressed tar stream into one object of the bucket: in
// Go, what a user would type as `tar -c DIR | zstd | aws s3 cp - s3://...`.
// Nothing of Lifeboat is in it on purpose.
//
// The parallelism is comparable to the node agent's on the benchmark's two
// cores: zstd compresses with one goroutine per CPU, and the upload keeps
// two 16 MiB parts in flight (what Lifeboat's own S3 store uses); reading
// is sequential (tar), from the page cache after the first run, as
// kopia's is.
//
// Compression is klauspost/compress's zstd (the library kopia's own zstd
// compressors are built on) at its default level, the zstd command's
// default (level 3); -level fastest is kopia's "zstd-fastest".
//
// Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as a
// plain user's. It prints one line, `files=<n> bytes=<file bytes>
// stored_bytes=<object bytes> seconds=<s> peak_rss_kib=<k>`, where seconds
// covers the walk and the upload, not process start.
package main

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/zstd"

	"github.com/lifeboat-io/lifeboat/bench/internal/selfrss"
)

type options struct {
	dir, endpoint, region, bucket, key, caFile string
	accessKey, secretKey                       string
	level                                      string
	partSize                                   int64
	concurrency                                int
	timeout                                    time.Duration
}

type result struct {
	files       int
	bytes       int64
	storedBytes int64
	elapsed     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "the directory to back up")
	flag.StringVar(&o.endpoint, "endpoint", "", "the S3 endpoint URL (http:// or https://)")
	flag.StringVar(&o.region, "region", "us-east-1", "the region requests are signed for")
	flag.StringVar(&o.bucket, "bucket", "", "the bucket")
	flag.StringVar(&o.key, "key", "", "the object to write")
	flag.StringVar(&o.caFile, "ca-file", "", "PEM file of a CA to trust for the endpoint's certificate")
	flag.StringVar(&o.level, "level", "default", "zstd level: fastest, default, better or best")
	flag.Int64Var(&o.partSize, "part-size", 16<<20, "multipart upload part size in bytes")
	flag.IntVar(&o.concurrency, "concurrency", 2, "parts uploaded at once")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.Parse()
	o.accessKey, o.secretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if o.dir == "" || o.endpoint == "" || o.bucket == "" || o.key == "" {
		fmt.Fprintln(os.Stderr, "fsfloor: -dir, -endpoint, -bucket and -key are required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsfloor:", err)
		os.Exit(1)
	}
	hwm, err := selfrss.PeakKiB()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsfloor:", err)
		os.Exit(1)
	}
	fmt.Printf("files=%d bytes=%d stored_bytes=%d seconds=%.6f peak_rss_kib=%d\n", res.files, res.bytes, res.storedBytes, res.elapsed.Seconds(), hwm)
}

func newClient(o options) (*s3.Client, error) {
	if o.accessKey == "" || o.secretKey == "" {
		return nil, errors.New("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	s3o := s3.Options{
		Region:       o.region,
		BaseEndpoint: aws.String(o.endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(o.accessKey, o.secretKey, ""),
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("reading -ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca-file %s holds no PEM certificate", o.caFile)
		}
		s3o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		})
	}
	return s3.New(s3o), nil
}

func zstdLevel(name string) (zstd.EncoderLevel, error) {
	ok, l := zstd.EncoderLevelFromString(name)
	if !ok {
		return 0, fmt.Errorf("unknown -level %q: want fastest, default, better or best", name)
	}
	return l, nil
}

func run(ctx context.Context, o options) (result, error) {
	var res result
	level, err := zstdLevel(o.level)
	if err != nil {
		return res, err
	}
	client, err := newClient(o)
	if err != nil {
		return res, err
	}
	up := transfermanager.New(client, func(to *transfermanager.Options) {
		to.PartSizeBytes = o.partSize
		to.MultipartUploadThreshold = o.partSize
		to.Concurrency = o.concurrency
	})
	start := time.Now()
	pr, pw := io.Pipe()
	var stored atomic.Int64
	archived := make(chan error, 1)
	go func() {
		err := archive(o.dir, &countingWriter{w: pw, n: &stored}, level, &res)
		pw.CloseWithError(err)
		archived <- err
	}()
	_, uerr := up.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(o.bucket), Key: aws.String(o.key), Body: pr,
	})
	// A failed upload stops reading: unblock the archiver before waiting.
	pr.CloseWithError(errors.New("upload ended"))
	aerr := <-archived
	if aerr != nil {
		return res, aerr
	}
	if uerr != nil {
		return res, fmt.Errorf("uploading s3://%s/%s: %w", o.bucket, o.key, uerr)
	}
	res.storedBytes = stored.Load()
	res.elapsed = time.Since(start)
	return res, nil
}

// archive writes dir's files, directories and symlinks as a tar stream
// through zstd into w.
func archive(dir string, w io.Writer, level zstd.EncoderLevel, res *result) error {
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(runtime.NumCPU()))
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	tw := tar.NewWriter(enc)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		res.files++
		res.bytes += n
		return nil
	})
	if err != nil {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return enc.Close()
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
