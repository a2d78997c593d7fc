package locations

import (
	"cmp"
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Problem is why a BackupStorageLocation cannot take writes now: the one
// rule the deletion and garbage collection (and the backup, for ReadOnly)
// decide by. Its values double as the velero.io/gc-failure label's.
type Problem string

const (
	// Usable: the location exists, is ReadWrite and was found Available.
	Usable Problem = ""
	// Missing: no location of that name.
	Missing Problem = "BSLNotFound"
	// ReadOnly: spec.accessMode is ReadOnly; nothing may be written or
	// removed until an operator changes it.
	ReadOnly Problem = "BSLReadOnly"
	// NotAvailable: the location controller has not found it Available
	// (Unavailable, or not checked yet); it may be soon.
	NotAvailable Problem = "BSLUnavailable"
)

// Writable says whether bsl (nil: none of that name) can be written to and
// deleted from now, and if not, why, in a message that names the location
// and what to do.
func Writable(name string, bsl *v1.BackupStorageLocation) (Problem, string) {
	switch {
	case bsl == nil:
		return Missing, fmt.Sprintf("BackupStorageLocation %q does not exist; recreate it", name)
	case bsl.Spec.AccessMode == v1.BackupStorageLocationAccessModeReadOnly:
		return ReadOnly, fmt.Sprintf("BackupStorageLocation %q is ReadOnly; set its spec.accessMode to ReadWrite", bsl.Name)
	case bsl.Status.Phase != v1.BackupStorageLocationPhaseAvailable:
		msg := fmt.Sprintf("BackupStorageLocation %q is %s", bsl.Name, cmp.Or(string(bsl.Status.Phase), "not validated yet"))
		if bsl.Status.Message != "" {
			msg += ": " + bsl.Status.Message
		}
		return NotAvailable, msg
	}
	return Usable, ""
}
