package controller

import (
	"context"
	"errors"
	"time"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// abandonedUploadsTimeout bounds opening the location and removing what a
// stopped server was uploading; the backup is Failed already, and its
// deletion removes whatever this leaves.
const abandonedUploadsTimeout = 2 * time.Minute

// removeAbandonedUploads removes the uploads into b's directory that the
// server running b was in the middle of when it stopped: a half-written
// tarball that no listing shows and that, on S3, is stored (and billed)
// until aborted. It runs once b is marked Failed, so no server of this
// cluster writes there any more. Failing here fails nothing: the deletion
// of the backup removes them too.
func (r *BackupReconciler) removeAbandonedUploads(ctx context.Context, b *v1.Backup) {
	if b.Spec.StorageLocation == "" || r.Locations == nil {
		return
	}
	log := r.Log.With("backup", b.Namespace+"/"+b.Name, "location", b.Spec.StorageLocation)
	ctx, cancel := context.WithTimeout(ctx, abandonedUploadsTimeout)
	defer cancel()
	bsl, err := r.Locations.Find(ctx, b.Spec.StorageLocation)
	if err != nil {
		log.Warn("the uploads the stopped server left unfinished stay until the backup is deleted", "error", err)
		return
	}
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		log.Warn("the uploads the stopped server left unfinished stay until the backup is deleted", "error", err)
		return
	}
	removed, err := store.RemoveUnfinishedBackupUploads(ctx, b.Name)
	if len(removed) > 0 {
		log.Info("removed the uploads the stopped server left unfinished", "uploads", removed)
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		log.Info("the location's object store cannot list unfinished uploads; any the stopped server left stay for the store's own lifecycle rules")
	case err != nil:
		log.Warn("the uploads the stopped server left unfinished stay until the backup is deleted", "error", err)
	}
}
