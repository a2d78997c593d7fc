package deletion

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Plan is what deleting a backup would do, worked out without changing
// anything: what `lifeboat backup delete --dry-run` shows. Every list is in
// a stable order, the order Run works in.
type Plan struct {
	Backup string `json:"backup"`
	// Actions are the DeleteItemActions by name, each with the items it
	// would receive, in tarball order. Run passes exactly these items.
	Actions []ActionPlan `json:"actions"`
	// Snapshots are the native volume snapshots to delete, in the order of
	// the backup's snapshots file.
	Snapshots []SnapshotPlan `json:"snapshots"`
	// PodVolumeSnapshots are the kopia snapshots of pod volumes to forget,
	// in the order Run forgets them.
	PodVolumeSnapshots []PodVolumeSnapshotPlan `json:"podVolumeSnapshots"`
	// PodVolumeRepositories are the repositories the backup's
	// PodVolumeBackups used; after the snapshots above, every other pod
	// volume snapshot tagged with the backup's UID is forgotten in each.
	PodVolumeRepositories []PodVolumeRepositoryPlan `json:"podVolumeRepositories"`
	// Restores are the Restores of the backup, by name, with their keys.
	Restores []RestorePlan `json:"restores"`
	// BackupKeys are the keys under backups/<name>/, in deletion order:
	// velero-backup.json last.
	BackupKeys []string `json:"backupKeys"`
	// Warnings say what the plan could not find out.
	Warnings []string `json:"warnings,omitempty"`
}

// ActionPlan is one DeleteItemAction and what it would receive.
type ActionPlan struct {
	Name string `json:"name"`
	// AppliesTo is the selector the plugin answered with.
	AppliesTo api.ResourceSelector `json:"appliesTo"`
	Items     []Item               `json:"items"`
}

// SnapshotPlan is one native volume snapshot.
type SnapshotPlan struct {
	SnapshotID       string `json:"snapshotID"`
	PersistentVolume string `json:"persistentVolume,omitempty"`
	// Location is the VolumeSnapshotLocation that took it; Provider its
	// VolumeSnapshotter ("" when the location could not be read).
	Location string `json:"location"`
	Provider string `json:"provider,omitempty"`
}

// RestorePlan is one Restore of the backup and its keys.
type RestorePlan struct {
	Name string   `json:"name"`
	Keys []string `json:"keys"`
}

// Plan works out what deleting b from store would do. store may be nil for
// a backup without a storage location. It reads the whole tarball, so a
// plan of a big backup holds every matching item: it is meant for showing,
// while Run streams.
func (e *Engine) Plan(ctx context.Context, b *v1.Backup, store *storage.BackupStore) (*Plan, error) {
	p := &Plan{Backup: b.Name, Actions: []ActionPlan{}, Snapshots: []SnapshotPlan{}, PodVolumeSnapshots: []PodVolumeSnapshotPlan{}, PodVolumeRepositories: []PodVolumeRepositoryPlan{}, Restores: []RestorePlan{}, BackupKeys: []string{}}
	if store == nil {
		p.Warnings = append(p.Warnings, "the backup records no storage location: there is no tarball, no snapshot record and no key to delete")
	}
	// stored is where the backup's own data is: nil when it has none.
	stored := store
	var storedUID string
	if store != nil && b.StoredNothing() {
		p.Warnings = append(p.Warnings, storedNothingWarning(b))
		stored = nil
	} else if store != nil {
		var err error
		if storedUID, err = checkIdentity(ctx, store, b); err != nil {
			return nil, err
		}
	}
	actions, err := e.loadActions(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range actions {
		p.Actions = append(p.Actions, ActionPlan{Name: a.name, AppliesTo: a.selector, Items: []Item{}})
	}
	if stored != nil && len(actions) > 0 {
		onItem := func(it *tarItem) error {
			for i, a := range actions {
				if a.matches(it) {
					p.Actions[i].Items = append(p.Actions[i].Items, it.item())
				}
			}
			return nil
		}
		err := scan(ctx, stored, b.Name, e.Limits, onItem)
		if errors.Is(err, errNoTarball) {
			var rebuilt int
			err = volumeInfoItems(ctx, stored, b, func(it *tarItem) error { rebuilt++; return onItem(it) })
			if err == nil && rebuilt == 0 {
				err = errNoVolumeInfo
			}
			if err == nil {
				p.Warnings = append(p.Warnings, fmt.Sprintf("the tarball of backup %s is not in the store; DeleteItemActions would get only the CSI snapshots its volume information names", b.Name))
			}
		}
		if errors.Is(err, errNoVolumeInfo) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("the tarball of backup %s is not in the store; DeleteItemActions would not be called", b.Name))
		} else if err != nil {
			return nil, err
		}
	}
	if stored != nil {
		snaps, err := volumefiles.GetSnapshots(ctx, stored, b.Name)
		if err != nil {
			return nil, err
		}
		providers := map[string]string{}
		for _, s := range snaps {
			if s.Status.ProviderSnapshotID == "" {
				continue
			}
			sp := SnapshotPlan{SnapshotID: s.Status.ProviderSnapshotID, PersistentVolume: s.Spec.PersistentVolumeName, Location: s.Spec.Location}
			provider, ok := providers[s.Spec.Location]
			if !ok && e.Cluster != nil && s.Spec.Location != "" {
				var perr error
				provider, _, perr = e.Cluster.SnapshotLocation(ctx, s.Spec.Location)
				if perr != nil {
					p.Warnings = append(p.Warnings, fmt.Sprintf("snapshot location %s: %v", s.Spec.Location, perr))
				}
				providers[s.Spec.Location] = provider
			}
			sp.Provider = provider
			p.Snapshots = append(p.Snapshots, sp)
		}
	}
	if stored != nil {
		w, err := e.podVolumeSnapshots(ctx, stored, b, dataUID(b, storedUID))
		if err != nil {
			return nil, err
		}
		p.PodVolumeSnapshots = append(p.PodVolumeSnapshots, w.snaps...)
		p.PodVolumeRepositories = append(p.PodVolumeRepositories, w.repos...)
	}
	if e.Cluster != nil {
		names, err := e.Cluster.Restores(ctx, b.Name)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			rp := RestorePlan{Name: name, Keys: []string{}}
			if store != nil {
				keys, err := store.ObjectStore().ListObjects(ctx, store.Bucket(), store.RestoreDir(name))
				if err != nil {
					return nil, fmt.Errorf("listing %s: %w", store.RestoreDir(name), err)
				}
				rp.Keys = append(rp.Keys, keys...)
			}
			p.Restores = append(p.Restores, rp)
		}
	}
	if stored != nil {
		keys, err := backupKeys(ctx, stored, b.Name)
		if err != nil {
			return nil, err
		}
		p.BackupKeys = append(p.BackupKeys, keys...)
	}
	return p, nil
}
