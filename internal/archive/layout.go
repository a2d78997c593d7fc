// Package archive reads and writes backup tarballs in Velero's layout
// (format 1.1.0), so that a backup written by either tool restores with the
// other.
//
// The layout, as Velero's item backupper and archive packages write it:
//
//	metadata/version                                                 "1.1.0\n"
//	resources/<resource.group>/namespaces/<ns>/<name>.json           namespaced item
//	resources/<resource.group>/cluster/<name>.json                   cluster-scoped item
//	resources/<resource.group>/<version>-preferredversion/namespaces/<ns>/<name>.json
//	resources/<resource.group>/<version>-preferredversion/cluster/<name>.json
//
// The core group has no ".group" suffix (resources/configmaps/...). Velero
// writes the unversioned copy and the "-preferredversion" copy only when the
// item was read at the preferred version; an item read at another version is
// stored once, under resources/<resource.group>/<version>/... without the
// suffix. Backups from Velero before API group versions support carry the
// unversioned copy only.
package archive

import (
	"errors"
	"strings"
)

// FormatVersion is the tarball layout version written to metadata/version
// and to a Backup's status.formatVersion.
const FormatVersion = "1.1.0"

const (
	resourcesDir        = "resources"
	metadataDir         = "metadata"
	clusterScopedDir    = "cluster"
	namespaceScopedDir  = "namespaces"
	preferredSuffix     = "-preferredversion"
	itemSuffix          = ".json"
	versionFilePath     = metadataDir + "/version"
	versionFileContents = FormatVersion + "\n"
)

// Errors a Reader wraps, so that callers can tell a hostile or broken
// archive from an I/O failure.
var (
	ErrUnsafePath      = errors.New("unsafe path")
	ErrUnsupportedType = errors.New("unsupported entry type")
	ErrTooLarge        = errors.New("too large")
)

// ItemRef identifies one stored item.
type ItemRef struct {
	// GroupResource is "resource.group", or just "resource" for the core
	// group (e.g. "configmaps", "deployments.apps").
	GroupResource string
	// Version is the API version the item was stored at (e.g. "v1"). The
	// writer stores the item under <Version>-preferredversion/; the reader
	// leaves it empty for the unversioned copy.
	Version string
	// Namespace is empty for cluster-scoped items.
	Namespace string
	Name      string
}

// validSegment reports whether s can be one path segment: a name that
// neither climbs out of its directory nor splits into more segments.
func validSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func (r ItemRef) validate() error {
	switch {
	case !validSegment(r.GroupResource):
		return errors.New("group resource must be one non-empty path segment")
	case !validSegment(r.Version):
		return errors.New("version must be one non-empty path segment")
	case r.Namespace != "" && !validSegment(r.Namespace):
		return errors.New("namespace must be one path segment")
	case !validSegment(r.Name):
		return errors.New("name must be one non-empty path segment")
	}
	return nil
}

// appendItemPath appends the item's path to buf; versionDir is empty for
// the unversioned copy.
func appendItemPath(buf []byte, r ItemRef, versionDir string) []byte {
	buf = append(buf, resourcesDir+"/"...)
	buf = append(buf, r.GroupResource...)
	buf = append(buf, '/')
	if versionDir != "" {
		buf = append(buf, versionDir...)
		buf = append(buf, '/')
	}
	if r.Namespace == "" {
		buf = append(buf, clusterScopedDir+"/"...)
	} else {
		buf = append(buf, namespaceScopedDir+"/"...)
		buf = append(buf, r.Namespace...)
		buf = append(buf, '/')
	}
	buf = append(buf, r.Name...)
	return append(buf, itemSuffix...)
}

// ParseItemPath reads an archive path as the reader does: the item it
// names, whether it is the copy under <version>-preferredversion/, and ok
// false for a path that is not an item in any layout Velero has written.
// For paths read from elsewhere than the tarball (an item digests file).
func ParseItemPath(p string) (ref ItemRef, preferred, ok bool) {
	if clean, err := cleanPath(p, false); err != nil || clean != p {
		return ItemRef{}, false, false
	}
	return parseItemPath(p)
}

// parseItemPath turns a path under resources/ back into an item reference.
// ok is false for paths that are not items in any layout Velero has written.
func parseItemPath(p string) (ref ItemRef, preferred, ok bool) {
	rest, found := strings.CutPrefix(p, resourcesDir+"/")
	if !found {
		return ItemRef{}, false, false
	}
	seg := strings.Split(rest, "/")
	if len(seg) < 3 {
		return ItemRef{}, false, false
	}
	ref.GroupResource = seg[0]
	file := seg[len(seg)-1]
	mid := seg[1 : len(seg)-1]

	// A version directory is never called "namespaces" or "cluster", so the
	// scope directory is recognised first; this keeps a namespace that is
	// itself called "cluster" unambiguous.
	switch {
	case len(mid) == 1 && mid[0] == clusterScopedDir:
	case len(mid) == 2 && mid[0] == namespaceScopedDir:
		ref.Namespace = mid[1]
	case len(mid) == 2 && mid[1] == clusterScopedDir:
		ref.Version = mid[0]
	case len(mid) == 3 && mid[1] == namespaceScopedDir:
		ref.Version = mid[0]
		ref.Namespace = mid[2]
	default:
		return ItemRef{}, false, false
	}
	if v, isPreferred := strings.CutSuffix(ref.Version, preferredSuffix); isPreferred {
		ref.Version = v
		preferred = true
		if v == "" {
			return ItemRef{}, false, false
		}
	}
	name, isItem := strings.CutSuffix(file, itemSuffix)
	if !isItem || name == "" {
		return ItemRef{}, false, false
	}
	ref.Name = name
	return ref, preferred, true
}
