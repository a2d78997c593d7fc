package s3

import (
	"strings"
	"testing"
)

// What kopia's S3 client is given for a BSL, resolved without a server:
// static credentials, a region and an s3Url.
func TestResolveConnection(t *testing.T) {
	creds := []byte("[default]\naws_access_key_id = a\naws_secret_access_key = b\n[other]\naws_access_key_id = c\naws_secret_access_key = d\naws_session_token = e\n")
	for name, tc := range map[string]struct {
		cfg  map[string]string
		want Connection
	}{
		"http endpoint": {
			map[string]string{"region": "eu-1", "s3Url": "http://minio.local:9000/", "bucket": "b"},
			Connection{Endpoint: "minio.local:9000", UseTLS: false, Region: "eu-1", AccessKeyID: "a", SecretAccessKey: "b"},
		},
		"https, profile, insecure, CA": {
			map[string]string{"region": "eu-1", "s3Url": "https://s3.example.com", "profile": "other", "insecureSkipTLSVerify": "true", "caCert": "PEM"},
			Connection{Endpoint: "s3.example.com", UseTLS: true, InsecureSkipTLSVerify: true, Region: "eu-1", CACert: []byte("PEM"), AccessKeyID: "c", SecretAccessKey: "d", SessionToken: "e"},
		},
		"AWS": {
			map[string]string{"region": "us-west-2"},
			Connection{Endpoint: "s3-us-west-2.amazonaws.com", UseTLS: true, Region: "us-west-2", AccessKeyID: "a", SecretAccessKey: "b"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ResolveConnection(t.Context(), tc.cfg, creds)
			if err != nil {
				t.Fatal(err)
			}
			if got.Endpoint != tc.want.Endpoint || got.UseTLS != tc.want.UseTLS || got.InsecureSkipTLSVerify != tc.want.InsecureSkipTLSVerify ||
				got.Region != tc.want.Region || string(got.CACert) != string(tc.want.CACert) || got.AccessKeyID != tc.want.AccessKeyID ||
				got.SecretAccessKey != tc.want.SecretAccessKey || got.SessionToken != tc.want.SessionToken {
				t.Errorf("ResolveConnection(%v) =\n %+v, want\n %+v", tc.cfg, got, tc.want)
			}
		})
	}
	_, err := ResolveConnection(t.Context(), map[string]string{"region": "r", "s3Url": "http://host/path"}, creds)
	if err == nil || !strings.Contains(err.Error(), "has a path") {
		t.Errorf("an s3Url with a path: %v", err)
	}
}
