package provider

import (
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/storage/s3"
)

// static credentials, so opening an S3 store makes no network call.
var creds = []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")

func TestOpenBuiltins(t *testing.T) {
	for _, tc := range []struct {
		provider string
		config   map[string]string
		check    func(any) bool
	}{
		{"lifeboat.io/filesystem", map[string]string{"path": t.TempDir()}, func(s any) bool { _, ok := s.(*filesystem.Store); return ok }},
		{"aws", map[string]string{"region": "us-east-1"}, func(s any) bool { _, ok := s.(*s3.Store); return ok }},
		{"velero.io/aws", map[string]string{"region": "us-east-1", "s3Url": "http://127.0.0.1:1", "s3ForcePathStyle": "true", "bucket": "b", "prefix": "p"}, func(s any) bool { _, ok := s.(*s3.Store); return ok }},
	} {
		s, err := Open(t.Context(), tc.provider, tc.config, creds)
		if err != nil {
			t.Errorf("Open(%q, %v): %v", tc.provider, tc.config, err)
			continue
		}
		if !tc.check(s) {
			t.Errorf("Open(%q) returned a %T", tc.provider, s)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		provider string
		config   map[string]string
		want     string
	}{
		"unknown provider": {"azure", nil,
			`unknown object store provider "azure" (built-in: aws, lifeboat.io/filesystem)`},
		"aws unknown key": {"aws", map[string]string{"region": "x", "s3URL": "http://h"},
			`object store provider "aws": unknown config key "s3URL" (allowed: bucket, caCert, checksumAlgorithm, insecureSkipTLSVerify, prefix, profile, publicUrl, region, s3ForcePathStyle, s3Url)`},
		"aws unknown keys": {"velero.io/aws", map[string]string{"region": "x", "kmsKeyId": "k", "serverSideEncryption": "AES256"},
			`object store provider "velero.io/aws": unknown config keys "kmsKeyId", "serverSideEncryption" (allowed: `},
		"aws bad bool": {"aws", map[string]string{"region": "x", "s3ForcePathStyle": "yes"},
			`object store provider "aws": config key "s3ForcePathStyle": invalid boolean "yes" (want "true" or "false")`},
		"aws bad bool insecure": {"aws", map[string]string{"region": "x", "insecureSkipTLSVerify": "1x"},
			`config key "insecureSkipTLSVerify": invalid boolean "1x"`},
		"aws bad checksum": {"aws", map[string]string{"region": "x", "checksumAlgorithm": "crc32"},
			`config key "checksumAlgorithm": unsupported value "crc32"`},
		"filesystem unknown key": {"lifeboat.io/filesystem", map[string]string{"path": "/tmp", "root": "/tmp"},
			`object store provider "lifeboat.io/filesystem": unknown config key "root" (allowed: bucket, path, prefix)`},
		"filesystem no path": {"lifeboat.io/filesystem", map[string]string{},
			`config key "path" is required`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(t.Context(), tc.provider, tc.config, creds)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open error = %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}
