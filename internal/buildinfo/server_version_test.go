package buildinfo

import (
	"testing"

	"golang.org/x/mod/semver"
)

// TestServerVersion: what a ServerStatusRequest reports is a valid semantic
// version whose major.minor is the Velero release Lifeboat speaks (Velero's
// CLI compares exactly that and warns "Please update server" otherwise),
// with Lifeboat's own version kept as build metadata.
func TestServerVersion(t *testing.T) {
	for _, tc := range []struct{ lifeboat, want string }{
		{"v0.4.0", "v1.18.3+lifeboat.v0.4.0"},
		{"dev", "v1.18.3+lifeboat.dev"},
		{"", "v1.18.3+lifeboat.unknown"},
		{"v0.4.1-0.20261201203000-9c640b3ab1c2+dirty", "v1.18.3+lifeboat.v0.4.1-0.20261201203000-9c640b3ab1c2-dirty"},
		{"v1.2.3_rc/1..x", "v1.18.3+lifeboat.v1.2.3-rc-1.x"},
	} {
		got := ServerVersion(tc.lifeboat)
		if got != tc.want {
			t.Errorf("ServerVersion(%q) = %q, want %q", tc.lifeboat, got, tc.want)
		}
		if !semver.IsValid(got) {
			t.Errorf("ServerVersion(%q) = %q is not a valid semantic version", tc.lifeboat, got)
		}
		if semver.MajorMinor(got) != semver.MajorMinor(VeleroVersion) {
			t.Errorf("ServerVersion(%q) = %q: major.minor is not Velero's %s", tc.lifeboat, got, VeleroVersion)
		}
	}
}
