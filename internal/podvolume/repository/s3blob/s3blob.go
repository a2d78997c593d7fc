// Package s3blob is kopia's blob storage in an S3 bucket, on the AWS SDK
// client Lifeboat's S3 object store builds from a location (package
// internal/storage/s3), instead of kopia's own minio-based one.
//
// The objects are the ones kopia's s3 storage (what Velero uses) writes and
// reads: key = prefix + blob ID, one PUT per blob with content type
// application/x-kopia, the storage class of the optional .storageconfig
// object, so the two open each other's repositories. What differs is the
// cost of an upload: minio-go signs every 64 KiB chunk of the body (streaming
// SigV4) over plain HTTP and sends a Content-MD5, and the server checks
// both; here, as the SDKs do, a body is hashed once with SHA-256 over plain
// HTTP and not at all over TLS (UNSIGNED-PAYLOAD), with no MD5, and with
// the CRC32 checksum the location's checksumAlgorithm asks for (the SDK's
// default; "" turns it off for servers that reject it). Measured in
// docs/fs-backup.md.
package s3blob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/retrying"

	s3store "github.com/lifeboat-io/lifeboat/internal/storage/s3"
)

// StorageType names this storage in kopia's connection info (the
// repository.config of a connection), where kopia's own is "s3".
const StorageType = "lifeboat-s3"

// ConfigName is the object, in the prefix, where kopia's s3 storage keeps
// per-blob-prefix storage classes. It is not a blob: lists skip it.
const ConfigName = ".storageconfig"

const contentType = "application/x-kopia"

// Options is what a connection is made from, and what kopia records in the
// repository.config to reopen it.
type Options struct {
	Bucket string `json:"bucket"`
	// Prefix is prepended to every blob ID (with its trailing slash).
	Prefix string `json:"prefix,omitempty"`
	// Config is the BackupStorageLocation's config, read as the S3 object
	// store reads it (s3Url, region, s3ForcePathStyle, profile, caCert,
	// insecureSkipTLSVerify, checksumAlgorithm, bucket).
	Config map[string]string `json:"config,omitempty"`
	// Credentials is the location's AWS credentials file; nil for the
	// SDK's default chain.
	Credentials []byte `json:"credentials,omitempty" kopia:"sensitive"`
}

type storage struct {
	blob.DefaultProviderImplementation

	opt      Options
	cli      *s3.Client
	endpoint string
	// checksum is the location's checksumAlgorithm when it names one;
	// empty leaves the client's own setting (CRC32, or none when the
	// location turns checksums off).
	checksum types.ChecksumAlgorithm
	classes  storageConfig
}

// storageConfig is the JSON of kopia's .storageconfig object.
type storageConfig struct {
	BlobOptions []struct {
		Prefix       string `json:"prefix"`
		StorageClass string `json:"storageClass"`
	} `json:"blobOptions,omitempty"`
}

func (c storageConfig) classOf(id blob.ID) types.StorageClass {
	for _, o := range c.BlobOptions {
		if strings.HasPrefix(string(id), o.Prefix) {
			return types.StorageClass(o.StorageClass)
		}
	}
	return ""
}

func init() {
	blob.AddSupportedStorage(StorageType, Options{}, New)
}

// New connects to the bucket. isCreate is ignored: the bucket must exist.
func New(ctx context.Context, opt *Options, isCreate bool) (blob.Storage, error) {
	st, err := newStorage(ctx, opt)
	if err != nil {
		return nil, err
	}
	// As kopia's s3 storage: transient errors (throttling, 5xx, resets)
	// are retried a few times before the repository sees them.
	return retrying.NewWrapper(st), nil
}

func newStorage(ctx context.Context, opt *Options, optFns ...func(*s3.Options)) (*storage, error) {
	if opt.Bucket == "" {
		return nil, errors.New("kopia S3 storage: no bucket: the BackupStorageLocation's spec.objectStorage.bucket is empty")
	}
	cfg := map[string]string{}
	for k, v := range opt.Config {
		cfg[k] = v
	}
	cfg["bucket"] = opt.Bucket
	cli, err := s3store.NewClient(ctx, cfg, opt.Credentials, optFns...)
	if err != nil {
		return nil, fmt.Errorf("kopia S3 storage in bucket %q: %w", opt.Bucket, err)
	}
	endpoint := cfg[s3store.KeyS3URL]
	if endpoint == "" {
		endpoint = "AWS " + cli.Options().Region
	}
	s := &storage{opt: *opt, cli: cli, endpoint: endpoint, checksum: types.ChecksumAlgorithm(cfg[s3store.KeyChecksumAlgorithm])}
	var out bytes.Buffer
	switch err := s.GetBlob(ctx, ConfigName, 0, -1, &outputBuffer{&out}); {
	case err == nil:
		if err := json.Unmarshal(out.Bytes(), &s.classes); err != nil {
			return nil, fmt.Errorf("kopia S3 storage at %s: object %s%s is not kopia's storage config: %w", s, opt.Prefix, ConfigName, err)
		}
	case errors.Is(err, blob.ErrBlobNotFound):
	default:
		return nil, fmt.Errorf("kopia S3 storage at %s: reading %s%s: %w", s, opt.Prefix, ConfigName, err)
	}
	return s, nil
}

func (s *storage) key(id blob.ID) string { return s.opt.Prefix + string(id) }

func (s *storage) GetBlob(ctx context.Context, id blob.ID, offset, length int64, output blob.OutputBuffer) error {
	output.Reset()
	if offset < 0 {
		return fmt.Errorf("get blob %s: offset %d: %w", id, offset, blob.ErrInvalidRange)
	}
	if length == 0 {
		// No byte range is empty in HTTP; the blob must exist, though.
		_, err := s.GetMetadata(ctx, id)
		return err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.key(id))}
	if length > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	} else if offset > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := s.cli.GetObject(ctx, in)
	if err != nil {
		return fmt.Errorf("get blob %s: %w", id, translate(err))
	}
	defer out.Body.Close()
	if _, err := io.Copy(output, out.Body); err != nil {
		output.Reset()
		return fmt.Errorf("get blob %s: reading the body: %w", id, err)
	}
	// A range running past the end comes back short, not refused.
	return blob.EnsureLengthExactly(output.Length(), length)
}

func (s *storage) GetMetadata(ctx context.Context, id blob.ID) (blob.Metadata, error) {
	out, err := s.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.key(id))})
	if err != nil {
		return blob.Metadata{}, fmt.Errorf("get metadata of blob %s: %w", id, translate(err))
	}
	return blob.Metadata{BlobID: id, Length: aws.ToInt64(out.ContentLength), Timestamp: aws.ToTime(out.LastModified)}, nil
}

func (s *storage) PutBlob(ctx context.Context, id blob.ID, data blob.Bytes, opts blob.PutOptions) error {
	switch {
	case opts.HasRetentionOptions():
		// Velero never asks for it; honouring it needs Content-MD5 and a
		// bucket with object lock, which this storage leaves out.
		return fmt.Errorf("put blob %s: retention (object lock, mode %q, period %v) is not supported by Lifeboat's S3 storage of file-system backup repositories: %w",
			id, opts.RetentionMode, opts.RetentionPeriod, blob.ErrUnsupportedPutBlobOption)
	case opts.DoNotRecreate:
		// As kopia's s3 storage: conditional writes are not honoured by
		// every S3-compatible server, and a silently ignored condition
		// would be worse than none.
		return fmt.Errorf("put blob %s: do-not-recreate: %w", id, blob.ErrUnsupportedPutBlobOption)
	case !opts.SetModTime.IsZero():
		return blob.ErrSetTimeUnsupported
	}
	body := data.Reader()
	defer body.Close()
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.opt.Bucket),
		Key:           aws.String(s.key(id)),
		Body:          body,
		ContentLength: aws.Int64(int64(data.Length())),
		ContentType:   aws.String(contentType),
	}
	if s.checksum != "" {
		in.ChecksumAlgorithm = s.checksum
	}
	if c := s.classes.classOf(id); c != "" {
		in.StorageClass = c
	}
	if _, err := s.cli.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put blob %s (%d bytes): %w", id, data.Length(), translate(err))
	}
	if opts.GetModTime != nil {
		// PutObject answers no Last-Modified; the stored one is what lists
		// will show.
		bm, err := s.GetMetadata(ctx, id)
		if err != nil {
			return err
		}
		*opts.GetModTime = bm.Timestamp
	}
	return nil
}

func (s *storage) DeleteBlob(ctx context.Context, id blob.ID) error {
	_, err := s.cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.key(id))})
	if err != nil {
		if err := translate(err); errors.Is(err, blob.ErrBlobNotFound) {
			return nil
		}
		return fmt.Errorf("delete blob %s: %w", id, translate(err))
	}
	return nil
}

func (s *storage) ListBlobs(ctx context.Context, prefix blob.ID, callback func(blob.Metadata) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.opt.Bucket), Prefix: aws.String(s.key(prefix))}
	for p := s3.NewListObjectsV2Paginator(s.cli, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list blobs with prefix %q: %w", prefix, translate(err))
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, s.opt.Prefix) {
				continue
			}
			id := blob.ID(k[len(s.opt.Prefix):])
			if id == ConfigName {
				continue
			}
			if err := callback(blob.Metadata{BlobID: id, Length: aws.ToInt64(o.Size), Timestamp: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *storage) ExtendBlobRetention(_ context.Context, id blob.ID, _ blob.ExtendOptions) error {
	return fmt.Errorf("extend retention of blob %s: Lifeboat's S3 storage of file-system backup repositories does not support object lock: %w", id, blob.ErrUnsupportedObjectLock)
}

func (s *storage) ConnectionInfo() blob.ConnectionInfo {
	opt := s.opt
	return blob.ConnectionInfo{Type: StorageType, Config: &opt}
}

func (s *storage) DisplayName() string {
	return fmt.Sprintf("S3: %v %v", s.endpoint, s.opt.Bucket)
}

func (s *storage) String() string {
	return fmt.Sprintf("s3://%s/%s", s.opt.Bucket, s.opt.Prefix)
}

// translate maps the S3 errors kopia tells apart to its sentinels, keeping
// the original in the chain.
func translate(err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%w: %w", blob.ErrBlobNotFound, err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			// Also a 404, but no blob is missing: the location is wrong.
			return err
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %w", blob.ErrBlobNotFound, err)
		case "InvalidRange":
			return fmt.Errorf("%w: %w", blob.ErrInvalidRange, err)
		case "ExpiredToken", "TokenRefreshRequired":
			return fmt.Errorf("%w: %w", blob.ErrInvalidCredentials, err)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		switch re.Response.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", blob.ErrBlobNotFound, err)
		case http.StatusRequestedRangeNotSatisfiable:
			return fmt.Errorf("%w: %w", blob.ErrInvalidRange, err)
		}
	}
	if strings.Contains(err.Error(), blob.InvalidCredentialsErrStr) {
		return fmt.Errorf("%w: %w", blob.ErrInvalidCredentials, err)
	}
	return err
}

// outputBuffer makes a bytes.Buffer a blob.OutputBuffer.
type outputBuffer struct{ *bytes.Buffer }

func (b *outputBuffer) Length() int { return b.Len() }

var _ blob.Storage = (*storage)(nil)
