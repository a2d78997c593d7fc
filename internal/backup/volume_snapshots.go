package backup

// Native volume snapshots: the backup's VolumeSnapshotLocations and taking
// a snapshot through their VolumeSnapshotters.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// The zone labels Velero reads a volume's availability zone from, newest
// first.
var zoneLabels = []string{"topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"}

// snapshotLocation is a VolumeSnapshotLocation the backup may use, with
// its VolumeSnapshotter, initialised once for the whole backup (not once
// per volume) on first use.
type snapshotLocation struct {
	name     string
	provider string
	config   map[string]string

	once    sync.Once
	vs      api.VolumeSnapshotter
	initErr error
}

func (l *snapshotLocation) snapshotter(p Plugins) (api.VolumeSnapshotter, error) {
	l.once.Do(func() {
		l.vs, l.initErr = p.VolumeSnapshotter(l.provider)
		if l.initErr == nil {
			l.initErr = l.vs.Init(l.config)
		}
		if l.initErr != nil {
			l.initErr = fmt.Errorf("VolumeSnapshotLocation %s (provider %s): %w", l.name, l.provider, l.initErr)
		}
	})
	return l.vs, l.initErr
}

// ResolveSnapshotLocations returns the VolumeSnapshotLocations a backup
// uses, by name: those spec.volumeSnapshotLocations names (each must exist,
// at most one per provider), or when it names none, the only location of
// each provider. Like Velero's server, the caller records the result in
// spec.volumeSnapshotLocations, so the backup says where its snapshots
// went. Problems come back as messages naming the field.
func ResolveSnapshotLocations(ctx context.Context, c crclient.Reader, b *v1.Backup) ([]string, []string) {
	list := &v1.VolumeSnapshotLocationList{}
	if err := c.List(ctx, list, crclient.InNamespace(b.Namespace)); err != nil {
		return nil, []string{fmt.Sprintf("spec.volumeSnapshotLocations: listing VolumeSnapshotLocations: %v", err)}
	}
	byName := map[string]*v1.VolumeSnapshotLocation{}
	byProvider := map[string][]string{}
	for i := range list.Items {
		l := &list.Items[i]
		byName[l.Name] = l
		byProvider[l.Spec.Provider] = append(byProvider[l.Spec.Provider], l.Name)
	}
	var msgs []string
	if len(b.Spec.VolumeSnapshotLocations) > 0 {
		seen := map[string]string{}
		var names []string
		for _, name := range b.Spec.VolumeSnapshotLocations {
			l, ok := byName[name]
			if !ok {
				msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: VolumeSnapshotLocation %q not found in namespace %s; create it or remove the name", name, b.Namespace))
				continue
			}
			if other, dup := seen[l.Spec.Provider]; dup && other != name {
				msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: %q and %q both use provider %s; name at most one location per provider", other, name, l.Spec.Provider))
				continue
			}
			if _, dup := seen[l.Spec.Provider]; !dup {
				seen[l.Spec.Provider] = name
				names = append(names, name)
			}
		}
		return names, msgs
	}
	var names []string
	providers := make([]string, 0, len(byProvider))
	for p := range byProvider {
		providers = append(providers, p)
	}
	sort.Strings(providers)
	for _, p := range providers {
		locs := byProvider[p]
		if len(locs) > 1 {
			sort.Strings(locs)
			// Velero refuses the backup too: snapshots in a location
			// chosen at random could not be found by the operator.
			msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: provider %s has several VolumeSnapshotLocations (%s); name the one to use", p, strings.Join(locs, ", ")))
			continue
		}
		names = append(names, locs[0])
	}
	return names, msgs
}

// snapshotLocations opens the backup's VolumeSnapshotLocations through
// the engine's SnapshotLocations, the one way every path opens them, so
// the snapshot is taken with the location's credentials.
func (r *run) snapshotLocations(ctx context.Context) ([]*snapshotLocation, error) {
	if len(r.b.Spec.VolumeSnapshotLocations) > 0 && r.e.SnapshotLocations == nil {
		return nil, errors.New("the backup names VolumeSnapshotLocations, and the engine has no way to open them")
	}
	var locs []*snapshotLocation
	for _, name := range r.b.Spec.VolumeSnapshotLocations {
		provider, config, err := r.e.SnapshotLocations.SnapshotLocation(ctx, name)
		if err != nil {
			return nil, err
		}
		locs = append(locs, &snapshotLocation{name: name, provider: provider, config: config})
	}
	return locs, nil
}

// snapshot asks each location's VolumeSnapshotter, in order, for the
// volume's ID; the first that knows the volume takes the snapshot (as
// Velero does).
func (r *run) snapshot(ctx context.Context, locs []*snapshotLocation, v *volumeItem, d volumehelper.Decision, info volumefiles.BackupVolumeInfo) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot) {
	// Only an explicit choice deserves a warning when it cannot be carried
	// out; the default (snapshotVolumes unset) quietly does what it can.
	explicit := d.Source == volumehelper.SourceRule || d.Source == volumehelper.SourceSnapshotVolumes
	notTaken := func(why string) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot) {
		if explicit {
			r.results.Warning(v.namespace(), fmt.Sprintf("%s: snapshot not taken: %s", v, why))
		}
		info.Skipped, info.SkippedReason = true, why
		return info, nil
	}
	if len(locs) == 0 {
		return notTaken("no VolumeSnapshotLocation is configured")
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v.pv)
	if err != nil {
		return notTaken(err.Error())
	}
	pv := &unstructured.Unstructured{Object: obj}
	var providers []string
	for _, loc := range locs {
		providers = append(providers, loc.provider)
		vs, err := loc.snapshotter(r.e.Plugins)
		if err != nil {
			return r.snapshotFailed(v, info, err)
		}
		volumeID, err := vs.GetVolumeID(pv)
		if err != nil {
			return r.snapshotFailed(v, info, fmt.Errorf("VolumeSnapshotLocation %s: GetVolumeID: %w", loc.name, err))
		}
		if volumeID == "" {
			continue
		}
		return r.takeSnapshot(ctx, vs, loc, v, volumeID, info)
	}
	return notTaken(fmt.Sprintf("no VolumeSnapshotter of the backup's locations (providers %s) can snapshot this volume", strings.Join(providers, ", ")))
}

func (r *run) takeSnapshot(ctx context.Context, vs api.VolumeSnapshotter, loc *snapshotLocation, v *volumeItem, volumeID string, info volumefiles.BackupVolumeInfo) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot) {
	if err := ctx.Err(); err != nil {
		return r.snapshotFailed(v, info, err)
	}
	az := ""
	for _, l := range zoneLabels {
		if z := v.pv.Labels[l]; z != "" {
			az = z
			break
		}
	}
	start := metav1.Now()
	info.StartTimestamp = &start
	volumeType, iops, err := vs.GetVolumeInfo(volumeID, az)
	if err != nil {
		return r.snapshotFailed(v, info, fmt.Errorf("VolumeSnapshotLocation %s: GetVolumeInfo(%s): %w", loc.name, volumeID, err))
	}
	tags := map[string]string{}
	for k, val := range r.b.Labels {
		tags[k] = val
	}
	tags["velero.io/backup"] = r.b.Name
	tags["velero.io/pv"] = v.pv.Name
	snap := &volumefiles.Snapshot{
		Spec: volumefiles.SnapshotSpec{
			BackupName: r.b.Name, BackupUID: string(r.b.UID), Location: loc.name,
			PersistentVolumeName: v.pv.Name, ProviderVolumeID: volumeID, VolumeType: volumeType, VolumeAZ: az, VolumeIOPS: iops,
		},
		Status: volumefiles.SnapshotStatus{Phase: volumefiles.SnapshotPhaseNew},
	}
	id, err := vs.CreateSnapshot(volumeID, az, tags)
	done := metav1.Now()
	info.CompletionTimestamp = &done
	info.BackupMethod = volumefiles.NativeSnapshot
	native := &volumefiles.NativeSnapshotInfo{VolumeType: volumeType, VolumeAZ: az, IOPS: "0"}
	if iops != nil {
		native.IOPS = strconv.FormatInt(*iops, 10)
	}
	info.NativeSnapshotInfo = native
	if err != nil {
		snap.Status.Phase = volumefiles.SnapshotPhaseFailed
		native.Phase = snap.Status.Phase
		info.Result = volumefiles.ResultFailed
		r.results.Error(v.namespace(), fmt.Sprintf("%s: snapshot through VolumeSnapshotLocation %s failed: %v", v, loc.name, err))
		return info, snap
	}
	snap.Status.ProviderSnapshotID, snap.Status.Phase = id, volumefiles.SnapshotPhaseCompleted
	native.SnapshotHandle, native.Phase = id, snap.Status.Phase
	info.Result = volumefiles.ResultSucceeded
	r.log.Info("volume snapshot taken", "volume", v.String(), "location", loc.name, "snapshotID", id)
	return info, snap
}

func (r *run) snapshotFailed(v *volumeItem, info volumefiles.BackupVolumeInfo, err error) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot) {
	r.results.Error(v.namespace(), fmt.Sprintf("%s: snapshot failed: %v", v, err))
	info.Result = volumefiles.ResultFailed
	info.Skipped, info.SkippedReason = true, "snapshot failed: "+err.Error()
	return info, nil
}
