package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/persistence"
	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
)

// veleroStoreCommand is the first argument that runs Velero's own
// persistence code (pkg/persistence, what Velero's server reads backups
// and deletes them with) over the directory store, instead of serving the
// plugin: `velero-sdk-plugin velero-store ROOT BUCKET PREFIX BACKUP`
// reads the backup's metadata and tarball as Velero's restore and sync do,
// then deletes the backup as Velero's deletion does, and prints what it
// did. Lifeboat writes files of its own beside Velero's; this shows, with
// Velero's code, that Velero reads such a backup and deletes all of it.
const veleroStoreCommand = "velero-store"

type oneStore struct{ s velero.ObjectStore }

func (g oneStore) GetObjectStore(string) (velero.ObjectStore, error) { return g.s, nil }

func runVeleroStore(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("usage: %s ROOT BUCKET PREFIX BACKUP", veleroStoreCommand)
	}
	root, bucket, prefix, name := args[0], args[1], args[2], args[3]
	loc := &velerov1api.BackupStorageLocation{Spec: velerov1api.BackupStorageLocationSpec{
		Provider: StoreName,
		Config:   map[string]string{RootKey: root},
		StorageType: velerov1api.StorageType{ObjectStorage: &velerov1api.ObjectStorageLocation{
			Bucket: bucket, Prefix: prefix,
		}},
	}}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	store, err := persistence.NewObjectBackupStoreGetter(nil).Get(loc, oneStore{&dirStore{}}, log)
	if err != nil {
		return fmt.Errorf("opening the store with Velero's persistence: %w", err)
	}
	b, err := store.GetBackupMetadata(name)
	if err != nil {
		return fmt.Errorf("GetBackupMetadata: %w", err)
	}
	fmt.Printf("metadata: %s phase %s\n", b.Name, b.Status.Phase)
	rc, err := store.GetBackupContents(name)
	if err != nil {
		return fmt.Errorf("GetBackupContents: %w", err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("reading the contents: %w", err)
	}
	fmt.Printf("contents: %d bytes\n", n)
	if err := store.DeleteBackup(name); err != nil {
		return fmt.Errorf("DeleteBackup: %w", err)
	}
	fmt.Println("deleted")
	return nil
}
