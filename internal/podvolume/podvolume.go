// Package podvolume is what the node agent (which finds a pod's volume on
// its node and keeps PodVolumeBackup/PodVolumeRestore objects current) and
// the data path (which moves the volume's files to and from a kopia
// repository in the backup storage location) agree on. Neither knows how the
// other works: the node agent never touches kopia, the data path never
// touches the API objects it serves.
package podvolume

import (
	"context"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Progress is how far one transfer is, in bytes of file data.
type Progress struct {
	TotalBytes int64
	BytesDone  int64
}

// Repository names the repository a volume's data lives in: as in Velero,
// one per (volume namespace, backup storage location).
type Repository struct {
	// Location is the backup storage location, as read from the cluster.
	Location *v1.BackupStorageLocation
	// VolumeNamespace is the namespace of the pod whose volume is moved.
	VolumeNamespace string
}

// BackupRequest asks for one volume's files to be stored.
type BackupRequest struct {
	Repository Repository
	// Path is the directory holding the volume's files, as this process
	// sees it (under the node agent's view of the kubelet's pod directory).
	Path string
	// Tags are the snapshot's tags, Velero's keys (backup, backup-uid, pod,
	// pod-uid, ns, volume, pvc-uid, ...); the data path also uses them to
	// find the parent snapshot of an incremental backup as Velero does.
	Tags map[string]string
	// PVCName is the name of the volume's PersistentVolumeClaim (Velero's
	// PodVolumeBackup annotation velero.io/pvc-name), empty for a volume
	// without one. As in Velero, the snapshot's source is
	// <namespace>/<pod>/<PVC name, else volume name>: the parent of an
	// incremental backup is looked for among the snapshots of the same
	// source, so a PVC's data stays incremental across pods.
	PVCName string
	// ParallelFilesUpload is how many files kopia reads at once (Velero's
	// uploader setting); 0 means as many as the node has CPUs.
	ParallelFilesUpload int
	// Progress, if set, is called as the transfer advances (not more than
	// a few times a second).
	Progress func(Progress)
}

// BackupResult is what a stored volume became.
type BackupResult struct {
	// SnapshotID identifies the snapshot in the repository (kopia's
	// manifest ID, as Velero records it in PodVolumeBackup status.snapshotID).
	SnapshotID string
	// Empty: the volume had no files; SnapshotID may be empty (as Velero).
	Empty bool
	// TotalBytes is the size of the volume's files.
	TotalBytes int64
}

// RestoreRequest asks for a stored snapshot's files to be written into a
// volume.
type RestoreRequest struct {
	Repository Repository
	SnapshotID string
	// Path is the directory of the (new) pod's volume to write into.
	Path string
	// WriteSparseFiles writes runs of zeros as holes (Velero's uploader
	// setting).
	WriteSparseFiles bool
	// ParallelFilesDownload is how many files kopia restores at once; 0
	// means as many as the node has CPUs.
	ParallelFilesDownload int
	Progress              func(Progress)
}

// DataPath moves volume data between a directory and a repository.
// Implementations open (and cache) repositories as needed; a cancelled
// context stops a transfer and returns its error.
type DataPath interface {
	Backup(ctx context.Context, req BackupRequest) (BackupResult, error)
	// Restore returns the bytes written.
	Restore(ctx context.Context, req RestoreRequest) (int64, error)
}

// Forgetter removes snapshots from repositories (a deleted backup's); their
// data is reclaimed by the repository's maintenance, as in Velero.
type Forgetter interface {
	// Forget removes one snapshot, by the ID a PodVolumeBackup recorded.
	Forget(ctx context.Context, repo Repository, snapshotID string) error
	// ForgetBackup removes every pod volume snapshot in repo tagged with the
	// backup's UID (tag BackupUIDTag), complete or not, and returns their
	// IDs: what a backup leaves that no PodVolumeBackup records, such as the
	// checkpoints of an upload that failed, or the snapshot of a transfer
	// whose node agent was killed before it wrote the ID down.
	ForgetBackup(ctx context.Context, repo Repository, backupUID string) ([]string, error)
}

// BackupUIDTag is the snapshot tag (from a PodVolumeBackup's spec.tags,
// Velero's key) naming the UID of the backup a snapshot belongs to.
const BackupUIDTag = "backup-uid"
