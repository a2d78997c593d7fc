package buildinfo

import (
	"regexp"
	"strings"
)

// VeleroVersion is the Velero release whose API, storage layout and plugin
// protocol Lifeboat speaks.
const VeleroVersion = "v1.18.3"

// ServerVersion is the version a ServerStatusRequest reports:
// VeleroVersion with Lifeboat's own version as semantic-version build
// metadata, e.g. v1.18.3+lifeboat.v0.4.0. Velero's CLI compares the
// major.minor of its own version with the server's and, when they differ,
// tells the user to upgrade one of them; reporting Lifeboat's version alone
// would make every `velero version` say "Please update server". Build
// metadata holds only [0-9A-Za-z-] in dot-separated, non-empty parts, so
// anything else in Lifeboat's version becomes "-".
func ServerVersion(lifeboat string) string {
	meta := badMetadata.ReplaceAllString(lifeboat, "-")
	var parts []string
	for p := range strings.SplitSeq(meta, ".") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = []string{"unknown"}
	}
	return VeleroVersion + "+lifeboat." + strings.Join(parts, ".")
}

var badMetadata = regexp.MustCompile(`[^0-9A-Za-z.-]`)
