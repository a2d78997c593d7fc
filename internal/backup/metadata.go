package backup

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// MarshalMetadata encodes b as its velero-backup.json. What the file holds
// is read back by every cluster that syncs the location, Velero's
// included, and becomes their Backup object: so it carries what the backup
// is, never this cluster's bookkeeping on the object. Finalizers would
// leave a synced Backup that Velero can never delete; the sync and GC
// marks would mislead the next reader. The UID stays, since it is how a
// deletion tells this backup from another of the same name; a Backup the
// sync created keeps the UID it was stored with.
func MarshalMetadata(b *v1.Backup) ([]byte, error) {
	stored := b.DeepCopy()
	stored.APIVersion, stored.Kind = v1.SchemeGroupVersion.String(), "Backup"
	stored.ManagedFields = nil
	stored.Finalizers = nil
	stored.DeletionTimestamp, stored.DeletionGracePeriodSeconds = nil, nil
	if uid := stored.Annotations[v1.StoredUIDAnnotation]; uid != "" {
		stored.UID = types.UID(uid)
	}
	delete(stored.Annotations, v1.StoredUIDAnnotation)
	delete(stored.Annotations, v1.SyncedAnnotation)
	for _, a := range v1.ClusterOnlyAnnotations {
		delete(stored.Annotations, a)
	}
	delete(stored.Labels, v1.GCFailureLabel)
	data, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("encoding backup %s: %w", b.Name, err)
	}
	return data, nil
}
