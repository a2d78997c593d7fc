package controller

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// dryRun answers a request with spec.dryRun: the deletion's plan, worked
// out by the engine without changing anything, in status.plan. A dry run
// neither waits for nor holds up other requests.
func (r *DeleteBackupRequestReconciler) dryRun(ctx context.Context, dbr *v1.DeleteBackupRequest, f deletion.Facts) error {
	if f.Backup == nil {
		return r.processedWithErrors(ctx, dbr, fmt.Sprintf("spec.backupName: backup %q not found in namespace %q", dbr.Spec.BackupName, dbr.Namespace))
	}
	b := *f.Backup
	var store *storage.BackupStore
	if loc := b.Spec.StorageLocation; loc != "" {
		if problem, msg := locations.Writable(loc, f.Location); problem != locations.Usable {
			return r.processedWithErrors(ctx, dbr, "cannot plan the deletion: "+msg)
		}
		var err error
		if store, err = r.openStore(ctx, f.Location); err != nil {
			return r.processedWithErrors(ctx, dbr, "cannot plan the deletion: "+err.Error())
		}
	}
	plan, err := r.Engine.Plan(ctx, &b, store)
	if err != nil {
		return r.processedWithErrors(ctx, dbr, "cannot plan the deletion: "+err.Error())
	}
	now := metav1.NewTime(r.now())
	return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = v1.DeleteBackupRequestPhaseProcessed
		s.Plan = apiPlan(plan)
		s.Errors, s.ErrorDetails = nil, nil
		s.CompletionTimestamp = &now
		setWaiting(dbr, "", "")
	})
}

// maxPlanBytes bounds the text a plan lists, next to the entry count:
// 5,000 entries of long names and keys could otherwise pass etcd's limit.
const maxPlanBytes = 256 << 10

// apiPlan turns the engine's plan into the bounded form a request holds:
// every count complete, the lists cut at DeletionPlanMaxItems entries (and
// maxPlanBytes) in all, in the order the deletion works.
func apiPlan(p *deletion.Plan) *v1.DeletionPlan {
	out := &v1.DeletionPlan{Warnings: slices.Clone(p.Warnings)}
	entries, bytes := v1.DeletionPlanMaxItems, maxPlanBytes
	take := func(s string, list *[]string) {
		if entries <= 0 || bytes < len(s) {
			out.Truncated = true
			entries = 0
			return
		}
		entries--
		bytes -= len(s)
		*list = append(*list, s)
	}
	for _, a := range p.Actions {
		pa := v1.DeletionPlanAction{Name: a.Name, Count: int64(len(a.Items))}
		for _, it := range a.Items {
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "/" + it.Name
			}
			take(it.Resource+" "+name, &pa.Items)
		}
		out.Actions = append(out.Actions, pa)
	}
	for _, s := range p.Snapshots {
		desc := s.Location + "/" + s.SnapshotID
		if s.PersistentVolume != "" {
			desc += " (" + s.PersistentVolume + ")"
		}
		take(desc, &out.Snapshots)
	}
	for _, s := range p.PodVolumeSnapshots {
		take(fmt.Sprintf("%s/%s (pod %s, volume %s)", s.VolumeNamespace, s.SnapshotID, s.Pod, s.Volume), &out.PodVolumeSnapshots)
	}
	for _, r := range p.PodVolumeRepositories {
		take(fmt.Sprintf("namespace %s in location %s (backup-uid %s)", r.VolumeNamespace, r.Location, r.BackupUID), &out.PodVolumeRepositories)
	}
	for _, rp := range p.Restores {
		take(rp.Name, &out.Restores)
	}
	for _, rp := range p.Restores {
		out.Keys += int64(len(rp.Keys))
		for _, k := range rp.Keys {
			take(k, &out.KeyList)
		}
	}
	out.Keys += int64(len(p.BackupKeys))
	for _, k := range p.BackupKeys {
		take(k, &out.KeyList)
	}
	return out
}
