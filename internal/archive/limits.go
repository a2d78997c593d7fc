package archive

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Limits bound a backup archive. A Reader refuses an archive past them, so
// that a hostile or corrupt one (a gzip bomb, a header claiming a huge file)
// fails fast instead of exhausting memory or disk; a Writer refuses to write
// one past them, so that a backup the server could not restore or delete
// fails when it is taken, not months later. Both sides must use the same
// values: the server passes one Limits to its backup, restore and deletion
// engines. Zero fields mean the defaults.
type Limits struct {
	// MaxEntryBytes bounds one entry (one item's JSON); an entry is read
	// into memory.
	MaxEntryBytes int64
	// MaxTotalBytes bounds the whole uncompressed tar stream, headers and
	// padding included; a restore spools that much to disk.
	MaxTotalBytes int64
	// MaxRatio bounds how many times larger the unpacked stream may grow
	// than the compressed bytes so far, once it has passed RatioGrace. Item
	// JSON compresses perhaps 5-40 times; a decompression bomb a thousand.
	// This catches a bomb after a few hundred MiB instead of at
	// MaxTotalBytes.
	MaxRatio int64
}

// Defaults for Limits fields left at zero. A Kubernetes object is at most a
// few MiB (etcd's request limit), so 64 MiB per item only stops nonsense.
const (
	DefaultMaxEntryBytes int64 = 64 << 20
	DefaultMaxTotalBytes int64 = 20 << 30
	DefaultMaxRatio      int64 = 200
)

// RatioGrace is the unpacked size below which MaxRatio is not checked:
// small archives of repetitive items may compress very well.
const RatioGrace int64 = 256 << 20

// The `lifeboat server` flags that set Limits. Errors name them, so that an
// operator whose backup or restore stops at a limit knows what to raise.
const (
	FlagMaxEntryBytes = "max-item-size"
	FlagMaxTotalBytes = "max-archive-size"
	FlagMaxRatio      = "max-archive-ratio"
)

// DefaultLimits returns the limits used for fields left at zero.
func DefaultLimits() Limits {
	return Limits{MaxEntryBytes: DefaultMaxEntryBytes, MaxTotalBytes: DefaultMaxTotalBytes, MaxRatio: DefaultMaxRatio}
}

// WithDefaults returns l with each zero or negative field set to its
// default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = d.MaxEntryBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = d.MaxRatio
	}
	return l
}

// entryLimit, totalLimit and ratioLimit describe a limit the way an
// operator sets it, e.g. "the limit on one item (--max-item-size=64Mi)".
func (l Limits) entryLimit() string {
	return fmt.Sprintf("the limit on one item (--%s=%s)", FlagMaxEntryBytes, Quantity(l.MaxEntryBytes))
}

func (l Limits) totalLimit() string {
	return fmt.Sprintf("the limit on a whole archive, unpacked (--%s=%s)", FlagMaxTotalBytes, Quantity(l.MaxTotalBytes))
}

func (l Limits) ratioLimit() string {
	return fmt.Sprintf("more than %d times its compressed size past %s unpacked (--%s=%d)", l.MaxRatio, Quantity(RatioGrace), FlagMaxRatio, l.MaxRatio)
}

// Quantity writes n bytes as the flags take them: "64Mi", "20Gi", "1500".
func Quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
