// Package s3 is the built-in ObjectStore for AWS S3 and S3-compatible
// servers. It reads the same BSL config keys, with the same meanings, as
// Velero's AWS plugin, so a BSL written for velero.io/aws works unchanged.
package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// ProviderName and VeleroProviderName select this store in a BSL.
const (
	ProviderName       = "aws"
	VeleroProviderName = "velero.io/aws"
)

// BSL config keys, named as in Velero's AWS plugin.
const (
	KeyRegion                = "region"
	KeyS3URL                 = "s3Url"
	KeyPublicURL             = "publicUrl"
	KeyS3ForcePathStyle      = "s3ForcePathStyle"
	KeyInsecureSkipTLSVerify = "insecureSkipTLSVerify"
	KeyProfile               = "profile"
	KeyCACert                = "caCert"
	KeyChecksumAlgorithm     = "checksumAlgorithm"
)

// ConfigKeys lists every config key the store accepts.
var ConfigKeys = append([]string{
	KeyRegion, KeyS3URL, KeyPublicURL, KeyS3ForcePathStyle, KeyInsecureSkipTLSVerify,
	KeyProfile, KeyCACert, KeyChecksumAlgorithm,
}, storage.VeleroInjectedConfigKeys...)

// The values Velero's AWS plugin accepts for checksumAlgorithm; "" turns
// checksums off for servers that reject them.
var checksumAlgorithms = []string{"", "CRC32", "CRC32C", "SHA1", "SHA256"}

const defaultChecksumAlgorithm = "CRC32"

// Uploads hold at most (uploadConcurrency+2) parts in memory: the part being
// filled, the ones in flight and the first one, read to decide between a
// single PUT and a multipart upload. 16 MiB parts keep that near 64 MiB and
// still allow a 160 GiB object of unknown length (S3 allows 10,000 parts).
const (
	uploadPartSize    = 16 << 20
	uploadConcurrency = 2
)

// abortTimeout bounds aborting a failed multipart upload. It runs on a fresh
// context because the usual reason for the failure is the caller's context
// being cancelled, and an abort that never runs leaves billed parts behind.
const abortTimeout = 30 * time.Second

// Store is the S3 ObjectStore.
type Store struct {
	client   *s3.Client
	presign  *s3.PresignClient
	uploader *transfermanager.Client
}

var (
	_ storage.ObjectStore       = (*Store)(nil)
	_ storage.UnfinishedUploads = (*Store)(nil)
)

type settings struct {
	region, s3URL, publicURL string
	forcePathStyle           bool
	insecureSkipTLSVerify    bool
	profile                  string
	profileSet               bool
	caCert                   string
	checksumAlgorithm        string
	bucket                   string
}

func parseConfig(cfg map[string]string) (settings, error) {
	if err := storage.CheckConfigKeys(cfg, ConfigKeys...); err != nil {
		return settings{}, err
	}
	s := settings{
		region:            cfg[KeyRegion],
		s3URL:             cfg[KeyS3URL],
		publicURL:         cfg[KeyPublicURL],
		profile:           cfg[KeyProfile],
		caCert:            cfg[KeyCACert],
		bucket:            cfg["bucket"],
		checksumAlgorithm: defaultChecksumAlgorithm,
	}
	if s.profile != "" {
		s.profileSet = true
	} else {
		s.profile = "default"
	}
	var err error
	if s.forcePathStyle, err = parseBool(cfg, KeyS3ForcePathStyle); err != nil {
		return settings{}, err
	}
	if s.insecureSkipTLSVerify, err = parseBool(cfg, KeyInsecureSkipTLSVerify); err != nil {
		return settings{}, err
	}
	for _, k := range []string{KeyS3URL, KeyPublicURL} {
		if v := cfg[k]; v != "" {
			if err := checkURL(v); err != nil {
				return settings{}, fmt.Errorf("config key %q: %w", k, err)
			}
		}
	}
	if alg, ok := cfg[KeyChecksumAlgorithm]; ok {
		if !slices.Contains(checksumAlgorithms, alg) {
			return settings{}, fmt.Errorf("config key %q: unsupported value %q (allowed: \"\" to disable, CRC32, CRC32C, SHA1, SHA256)", KeyChecksumAlgorithm, alg)
		}
		s.checksumAlgorithm = alg
	}
	return s, nil
}

func parseBool(cfg map[string]string, key string) (bool, error) {
	v, ok := cfg[key]
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("config key %q: invalid boolean %q (want \"true\" or \"false\")", key, v)
	}
	return b, nil
}

func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid URL %q: want http:// or https:// and a host", v)
	}
	return nil
}

// New opens the store described by a BSL config. credentials is the content
// of an AWS shared-credentials (or config) file, read with the "profile" key;
// nil means the SDK's default chain (environment, ~/.aws, web identity,
// instance metadata).
func New(ctx context.Context, cfg map[string]string, credentials []byte) (*Store, error) {
	s, awsCfg, err := resolve(ctx, cfg, credentials)
	if err != nil {
		return nil, err
	}
	client := newClient(awsCfg, s.s3URL, s.forcePathStyle)
	presignFrom := client
	if s.publicURL != "" {
		presignFrom = newClient(awsCfg, s.publicURL, s.forcePathStyle)
	}
	uploader := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = uploadPartSize
		o.MultipartUploadThreshold = uploadPartSize
		o.Concurrency = uploadConcurrency
		o.FailTimeout = abortTimeout
		if s.checksumAlgorithm == "" {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		} else {
			o.ChecksumAlgorithm = tmtypes.ChecksumAlgorithm(s.checksumAlgorithm)
		}
	})
	return &Store{client: client, presign: s3.NewPresignClient(presignFrom), uploader: uploader}, nil
}

// NewClient returns an S3 client for the server a BSL config describes,
// built as the ObjectStore's own is (endpoint, region, path style,
// credentials and profile, CA bundle, insecureSkipTLSVerify, checksums), for
// other users of the same location: kopia's blob storage of file-system
// backup repositories. optFns amend the client's options last.
func NewClient(ctx context.Context, cfg map[string]string, credentials []byte, optFns ...func(*s3.Options)) (*s3.Client, error) {
	s, awsCfg, err := resolve(ctx, cfg, credentials)
	if err != nil {
		return nil, err
	}
	return newClient(awsCfg, s.s3URL, s.forcePathStyle, optFns...), nil
}

// resolve reads a BSL config and credentials into the SDK config every
// client of the location is made from, with its region settled.
func resolve(ctx context.Context, cfg map[string]string, credentials []byte) (settings, aws.Config, error) {
	s, err := parseConfig(cfg)
	if err != nil {
		return settings{}, aws.Config{}, err
	}
	var opts []func(*config.LoadOptions) error
	if s.region != "" {
		opts = append(opts, config.WithRegion(s.region))
	}
	if s.checksumAlgorithm == "" {
		opts = append(opts,
			config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	if s.insecureSkipTLSVerify || s.caCert != "" {
		roots, err := rootCAs(s.caCert)
		if err != nil {
			return settings{}, aws.Config{}, err
		}
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			// Amend the SDK's TLS settings (minimum version and so on)
			// rather than replace them.
			if tr.TLSClientConfig == nil {
				tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			if roots != nil {
				tr.TLSClientConfig.RootCAs = roots
			}
			tr.TLSClientConfig.InsecureSkipVerify = s.insecureSkipTLSVerify //nolint:gosec // the BSL asks for it
		})))
	}
	awsCfg, err := loadConfig(ctx, s, credentials, opts)
	if err != nil {
		return settings{}, aws.Config{}, err
	}

	switch {
	case s.region != "":
	case s.s3URL != "":
		// S3-compatible servers mostly ignore the region, but SigV4 signs
		// with one.
		awsCfg.Region = "us-east-1"
	case s.bucket != "":
		// As Velero does: the bucket knows its region better than the
		// environment does.
		region, err := discoverBucketRegion(ctx, awsCfg, s.bucket, "")
		if err != nil {
			return settings{}, aws.Config{}, err
		}
		awsCfg.Region = region
	case awsCfg.Region != "":
		// From AWS_REGION or the profile.
	default:
		return settings{}, aws.Config{}, fmt.Errorf("config key %q is required (it could not be discovered: no %q, no bucket, no region in the environment or profile)", KeyRegion, KeyS3URL)
	}
	return s, awsCfg, nil
}

// rootCAs returns the system roots plus caCert, or nil when caCert is empty.
func rootCAs(caCert string) (*x509.CertPool, error) {
	if caCert == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM([]byte(caCert)) {
		return nil, fmt.Errorf("config key %q: no PEM certificate found", KeyCACert)
	}
	return pool, nil
}

// loadConfig loads the SDK config. Credentials given as bytes go through a
// temporary file that is removed before this returns: the SDK reads shared
// config files only while loading, and going through its own loader keeps
// every profile form it understands (static keys, role_arn with
// source_profile, credential_process, sso) and Velero's habit of passing a
// config-format file as credentials, which a hand-written INI parser for
// static keys would not.
func loadConfig(ctx context.Context, s settings, credentials []byte, opts []func(*config.LoadOptions) error) (aws.Config, error) {
	if credentials == nil {
		if s.profileSet {
			opts = append(opts, config.WithSharedConfigProfile(s.profile))
		}
		cfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
		}
		return cfg, nil
	}
	path, err := writeTemp(credentials)
	if err != nil {
		return aws.Config{}, fmt.Errorf("stage AWS credentials: %w", err)
	}
	opts = append(opts,
		config.WithSharedCredentialsFiles([]string{path}),
		config.WithSharedConfigFiles([]string{path}),
		config.WithSharedConfigProfile(s.profile))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if rmErr := os.Remove(path); rmErr != nil && err == nil {
		err = fmt.Errorf("remove staged credentials file: %w", rmErr)
	}
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS credentials (profile %q): %w", s.profile, err)
	}
	// Fail at Open, not on the first backup, when the profile holds no
	// usable credentials.
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, fmt.Errorf("AWS credentials (profile %q): %w", s.profile, err)
	}
	return cfg, nil
}

func writeTemp(b []byte) (string, error) {
	f, err := os.CreateTemp("", "lifeboat-aws-credentials-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func newClient(cfg aws.Config, endpoint string, pathStyle bool, optFns ...func(*s3.Options)) *s3.Client {
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		// A multipart object has no whole-object checksum to validate; the
		// SDK would log a warning on every such download.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.UsePathStyle = pathStyle
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}}, optFns...)...)
}

// discoverBucketRegion asks S3 where bucket lives. S3 names the region in the
// x-amz-bucket-region header even when it refuses the (unsigned) request, so
// this needs no permission on the bucket. endpoint is for tests.
func discoverBucketRegion(ctx context.Context, cfg aws.Config, bucket, endpoint string) (string, error) {
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Region = "us-east-1"
		o.Credentials = aws.AnonymousCredentials{}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	out, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		if r := aws.ToString(out.BucketRegion); r != "" {
			return r, nil
		}
		if raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response); ok {
			if r := raw.Header.Get("X-Amz-Bucket-Region"); r != "" {
				return r, nil
			}
		}
		err = errors.New("no region in the response")
	} else {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.Response != nil {
			if r := re.Response.Header.Get("X-Amz-Bucket-Region"); r != "" {
				return r, nil
			}
		}
	}
	return "", fmt.Errorf("discover the region of bucket %q (set config key %q to skip this): %w", bucket, KeyRegion, err)
}

// PutObject streams body through the transfer manager: a single PUT for
// small bodies, a multipart upload with bounded buffers otherwise.
func (s *Store) PutObject(ctx context.Context, bucket, key string, body io.Reader) error {
	_, err := s.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   body,
	})
	if err != nil {
		return fmt.Errorf("put object %s/%s: %w", bucket, key, err)
	}
	return nil
}

// GetObject streams the object; the body is bound to ctx.
func (s *Store) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("get object %s/%s: %w: %w", bucket, key, storage.ErrNotFound, err)
		}
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
	}
	return out.Body, nil
}

// ObjectExists uses HEAD, which has no body: a missing key shows only as a
// bare 404 ("NotFound").
func (s *Store) ObjectExists(ctx context.Context, bucket, key string) (bool, error) {
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("object exists %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// ListCommonPrefixes pages through ListObjectsV2 with a delimiter.
func (s *Store) ListCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error) {
	if delimiter == "" {
		return nil, nil
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), Delimiter: aws.String(delimiter)}
	var out []string
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list common prefixes %s/%s (delimiter %q): %w", bucket, prefix, delimiter, err)
		}
		for _, cp := range page.CommonPrefixes {
			out = append(out, aws.ToString(cp.Prefix))
		}
	}
	// S3 returns them sorted; some compatible servers do not.
	slices.Sort(out)
	return out, nil
}

// ListObjects pages through ListObjectsV2 without a delimiter.
func (s *Store) ListObjects(ctx context.Context, bucket, prefix string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	var out []string
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list objects %s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key))
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteObject deletes key. S3 answers 204 for a missing key; some
// compatible servers answer 404, which is treated the same.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	return nil
}

// ListUnfinishedUploads lists the multipart uploads under prefix that were
// started and neither completed nor aborted. The transfer manager aborts
// its own on every error it lives to see; the ones found were left by a
// process that died mid-upload (their parts are stored, and billed, until
// aborted), or belong to an upload still running.
func (s *Store) ListUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	err := s.eachUnfinishedUpload(ctx, bucket, prefix, func(u types.MultipartUpload) error {
		keys = append(keys, aws.ToString(u.Key))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list unfinished uploads %s/%s: %w", bucket, prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// RemoveUnfinishedUploads aborts the multipart uploads under prefix, which
// deletes the parts they stored. An upload gone in the meantime counts as
// removed.
func (s *Store) RemoveUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	var removed []string
	var errs []error
	err := s.eachUnfinishedUpload(ctx, bucket, prefix, func(u types.MultipartUpload) error {
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		if err != nil && !isNoSuchUpload(err) {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("abort upload %s of %s: %w", aws.ToString(u.UploadId), aws.ToString(u.Key), err))
			return nil
		}
		removed = append(removed, aws.ToString(u.Key))
		return nil
	})
	slices.Sort(removed)
	if err := errors.Join(append(errs, err)...); err != nil {
		return removed, fmt.Errorf("remove unfinished uploads %s/%s: %w", bucket, prefix, err)
	}
	return removed, nil
}

func (s *Store) eachUnfinishedUpload(ctx context.Context, bucket, prefix string, fn func(types.MultipartUpload) error) error {
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for p := s3.NewListMultipartUploadsPaginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if err := fn(u); err != nil {
				return err
			}
		}
	}
	return nil
}

// CreateSignedURL presigns a GET, against publicUrl when the BSL sets one
// (the address clients outside the cluster use).
func (s *Store) CreateSignedURL(ctx context.Context, bucket, key string, ttl time.Duration) (string, error) {
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("create signed url %s/%s: %w", bucket, key, err)
	}
	return req.URL, nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		}
	}
	return false
}

// isNoSuchUpload reports an upload that is not there (any more). Only
// AbortMultipartUpload models the error, so its code is checked too.
func isNoSuchUpload(err error) bool {
	var nsu *types.NoSuchUpload
	var ae smithy.APIError
	return errors.As(err, &nsu) || (errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload")
}
