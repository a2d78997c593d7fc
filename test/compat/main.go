// Command compat-plugin is a plugin binary built with Velero's own plugin SDK
// (github.com/vmware-tanzu/velero/pkg/plugin/framework), nothing of
// Lifeboat's. Lifeboat's end-to-end tests (test/plugins) put it in the
// server's plugin dir to show that a plugin written for Velero runs under
// Lifeboat unchanged: it is listed, its ObjectStore serves a
// BackupStorageLocation, its BackupItemActions change stored items (one
// takes the claims of volumes a resource policy leaves to plugins) and its
// DeleteItemAction is called with the items of a backup.
//
// This module must stay separate from Lifeboat's: Velero's generated
// protobuf packages register the same proto names as Lifeboat's, so the two
// SDKs never go into one binary.
package main

import (
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
)

// The plugin names, as `lifeboat plugin get` lists them.
const (
	AnnotateName = "compat.example.io/annotate"
	// CustomVolumeName takes the claims labelled CustomVolumeLabel=yes.
	CustomVolumeName = "compat.example.io/custom-volume"
	RecordName       = "compat.example.io/record-deletes"
	StoreName        = "compat.example.io/dirstore"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == veleroStoreCommand {
		if err := runVeleroStore(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	framework.NewServer().
		// Velero's own plugins bind the command line this way: the host's
		// --log-level and --features are read, any other flag is ignored.
		BindFlags(pflag.CommandLine).
		RegisterBackupItemAction(AnnotateName, newAnnotate).
		RegisterBackupItemAction(CustomVolumeName, newCustomVolume).
		RegisterDeleteItemAction(RecordName, newRecordDeletes).
		RegisterObjectStore(StoreName, newDirStore).
		Serve()
}

// newDirStore is the ObjectStore's initializer for Velero's framework. The
// store itself, dirStore in dirstore.go, is a copy of the Lifeboat-SDK
// example's store.go and must stay one: the SDK glue lives here.
func newDirStore(logrus.FieldLogger) (any, error) { return &dirStore{}, nil }

var _ velero.ObjectStore = (*dirStore)(nil)
