// Package buildinfo holds the version of the binary: stamped at build time
// by the Makefile, or else read from what the Go toolchain records in every
// binary, so that a plain `go build` or `go install` reports a real version.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is set by the Makefile with -ldflags -X (git describe). Left
// empty, init fills it from the build information.
var Version = ""

// GitCommit is the VCS revision the binary was built from, with "-dirty"
// when the work tree had changes; "" when the toolchain recorded none (go
// test, or a build outside a repository).
var GitCommit = ""

func init() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	v, commit := fromBuildInfo(info)
	if Version == "" {
		Version = v
	}
	if GitCommit == "" {
		GitCommit = commit
	}
}

// fromBuildInfo picks a version and commit from the build information:
// the module version when the binary was built from a module download
// (go install ...@v1.2.3), else "dev-<revision>" from the VCS stamp of a
// build in a checkout, else "dev".
func fromBuildInfo(info *debug.BuildInfo) (version, commit string) {
	if info == nil {
		return "dev", ""
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision != "" {
		commit = revision
		if modified == "true" {
			commit += "-dirty"
		}
	}
	// Go 1.24+ derives a pseudo-version from the VCS stamp for builds in a
	// checkout ("v0.0.0-20260301120000-abcdef123456+dirty"); "+" is not
	// allowed in an image tag, and the version names the default image.
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return strings.ReplaceAll(v, "+", "."), commit
	}
	if revision != "" {
		short := revision
		if len(short) > 12 {
			short = short[:12]
		}
		v := "dev-" + short
		if modified == "true" {
			v += "-dirty"
		}
		return v, commit
	}
	return "dev", commit
}
