package s3

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// Connection is what another S3 client (kopia's, for file-system backup
// repositories) needs to reach the store a BSL config describes, resolved
// the way this store resolves it: the same config keys, the same profile
// forms of the credential file, the same region discovery.
type Connection struct {
	// Endpoint is host[:port], without scheme.
	Endpoint string
	// UseTLS is false only for an http:// s3Url, as in Velero.
	UseTLS                bool
	InsecureSkipTLSVerify bool
	Region                string
	// CACert is the PEM bundle to trust besides the system roots.
	CACert []byte

	AccessKeyID, SecretAccessKey, SessionToken string
}

// ResolveConnection reads cfg (a BSL config, with "bucket" and "caCert" as
// Velero injects them) and credentials (the BSL's credential file, or nil
// for the SDK's default chain) into a Connection. Temporary credentials
// (a role, SSO) are resolved now and expire; callers reconnect.
func ResolveConnection(ctx context.Context, cfg map[string]string, credentials []byte) (Connection, error) {
	s, err := parseConfig(cfg)
	if err != nil {
		return Connection{}, err
	}
	awsCfg, err := loadConfig(ctx, s, credentials, nil)
	if err != nil {
		return Connection{}, err
	}
	c := Connection{
		UseTLS:                true,
		InsecureSkipTLSVerify: s.insecureSkipTLSVerify,
		Region:                s.region,
		CACert:                []byte(s.caCert),
	}
	if len(c.CACert) == 0 {
		c.CACert = nil
	}
	if c.Region == "" && s.s3URL == "" {
		switch {
		case s.bucket != "":
			if c.Region, err = discoverBucketRegion(ctx, awsCfg, s.bucket, ""); err != nil {
				return Connection{}, err
			}
		case awsCfg.Region != "":
			c.Region = awsCfg.Region
		default:
			return Connection{}, fmt.Errorf("config key %q is required (it could not be discovered: no %q, no bucket, no region in the environment or profile)", KeyRegion, KeyS3URL)
		}
	}
	if s.s3URL == "" {
		// AWS itself, at the regional endpoint Velero's repositories use.
		c.Endpoint = "s3-" + c.Region + ".amazonaws.com"
	} else {
		u, err := url.Parse(s.s3URL)
		if err != nil {
			return Connection{}, fmt.Errorf("config key %q: %w", KeyS3URL, err)
		}
		if u.Path != "" && u.Path != "/" {
			return Connection{}, fmt.Errorf("config key %q: %q has a path; file-system backup repositories need the server's address only (scheme://host[:port])", KeyS3URL, s.s3URL)
		}
		c.Endpoint = strings.Trim(u.Host, "/")
		c.UseTLS = u.Scheme != "http"
	}
	if awsCfg.Credentials == nil {
		return Connection{}, fmt.Errorf("no AWS credentials: set the BackupStorageLocation's spec.credential or give the server credentials in its environment")
	}
	creds, err := awsCfg.Credentials.Retrieve(ctx)
	if err != nil {
		return Connection{}, fmt.Errorf("AWS credentials (profile %q): %w", s.profile, err)
	}
	c.AccessKeyID, c.SecretAccessKey, c.SessionToken = creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken
	return c, nil
}
