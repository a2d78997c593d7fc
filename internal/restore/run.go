package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/policyfilters"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/jsonmap"
	"github.com/lifeboat-io/lifeboat/internal/resourcelist"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/runlog"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// createWorkers bounds concurrent creates within one resource type. Items
// of one type do not depend on each other; types are restored in order.
const createWorkers = 8

type run struct {
	e        *Engine
	rs       *v1.Restore
	b        *v1.Backup
	store    *storage.BackupStore
	progress ProgressFunc
	log      *runlog.Log
	results  results.Recorder
	dyn      dynamic.Interface
	cs       kubernetes.Interface
	types    *clusterTypes
	tf       *transformer

	total    int
	restored atomic.Int64
	spool    *spool
	actions  []itemAction
	// claimed holds the items handled, when actions may name items out of
	// order; nil otherwise.
	claimed map[string]bool

	mu sync.Mutex
	// uids maps an owner's identity (group/kind/namespace/name, target
	// namespace) to the UID it got here, to rewrite owner references.
	uids map[string]types.UID
	// wantedOwners, when not nil, are the owners (group/kind/name) that
	// restored items refer to: only their UIDs are kept, so the map grows
	// with the owners, not with every item restored.
	wantedOwners map[string]bool
	// fixups are items whose owners were restored after them.
	fixups []ownerFixup
	// namespaces already known to exist in the target cluster.
	namespaces map[string]bool
	nsGroup    singleflight.Group
	// resourceList is "v1/ConfigMap" -> "ns/name(created)", as Velero
	// writes it; kept on local disk, not in memory, at scale.
	resourceList *resourcelist.List
	// createdClaims are the claims this restore created ("ns/name").
	createdClaims map[string]bool
	lastReport    time.Time
	// dry is what a dry run learns; nil when the restore is not one.
	dry *dryRun

	// snapshots are the backup's completed native snapshots by PV name;
	// volumeInfos record the volumes restored from them.
	snapshots   map[string]volumefiles.Snapshot
	volumeInfos []volumefiles.RestoreVolumeInfo
	// reprovisioned holds the stored PVs left out so that their claims get
	// new volumes (provisionAnew); PVs are restored before claims, so the
	// set is complete when the first claim is restored.
	reprovisioned map[string]bool
	// snapshotters are the locations' VolumeSnapshotters, by location.
	snapshotters   map[string]snapshotterResult
	snapshottersMu sync.Mutex
	// csi is what the restore knows of the backup's CSI snapshots.
	csi *csiRestore
	// csiByFilters holds the stored VolumeSnapshots and contents the
	// restore's filters admit (itemKey); csiExcluded the snapshot types
	// spec.excludedResources names. Both are set while spooling.
	csiByFilters map[string]bool
	csiExcluded  map[schema.GroupResource]bool
	// csiClaims are the restore volume information of claims made from a
	// CSI snapshot, by target namespace/name, recorded once created.
	csiClaims map[string]volumefiles.RestoreVolumeInfo

	// hookRules are the spec's restore hooks; exec hooks run under
	// hookCtx in hookWG, counted under hookMu.
	hookRules                   *hooks.RestoreRules
	hookCtx                     context.Context
	hookWG                      sync.WaitGroup
	hookMu                      sync.Mutex
	hooksAttempted, hooksFailed int

	// pvbs are the backup's PodVolumeBackups; pendingPVRs the
	// PodVolumeRestores created for them, waited for at the end.
	pvbs        []v1.PodVolumeBackup
	pendingPVRs []pendingPVR
	// The restore-wait container's image and command, read once.
	helperOnce    sync.Once
	helperImage   string
	helperCommand []string
}

type ownerFixup struct {
	info resourceInfo
	ns   string
	name string
	refs []metav1.OwnerReference
}

func (e *Engine) newRun(rs *v1.Restore, b *v1.Backup, store *storage.BackupStore, progress ProgressFunc) (*run, error) {
	lg, err := runlog.Create(e.WorkDir, "restore", rs.Namespace+"/"+rs.Name)
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(v1.RestoreProgress) {}
	}
	r := &run{
		e: e, rs: rs, b: b, store: store, progress: progress, log: lg,
		dyn: e.acc.Dynamic, cs: e.acc.Typed, types: newClusterTypes(e.acc.Discovery), tf: newTransformer(rs, b.Name),
		uids: map[string]types.UID{}, namespaces: map[string]bool{}, resourceList: resourcelist.New(e.WorkDir), createdClaims: map[string]bool{},
	}
	if rs.Spec.DryRun {
		r.dry = newDryRun()
	}
	return r, nil
}

func (r *run) close() {
	r.log.Discard()
	if err := r.resourceList.Close(); err != nil {
		r.e.log.Warn("removing the resource list's temporary files", "restore", r.rs.Namespace+"/"+r.rs.Name, "error", err)
	}
}

func (r *run) execute(ctx context.Context) (err error) {
	if r.hookRules, err = hooks.NewRestoreRules(r.rs.Spec.Hooks.Resources); err != nil {
		return fmt.Errorf("invalid hooks: %w", err)
	}
	hookCtx, cancelHooks := context.WithCancelCause(ctx)
	r.hookCtx = hookCtx
	// The restore ends when its pods' exec hooks have: they are part of
	// its outcome. A restore that failed stops waiting for them.
	defer func() {
		if err != nil {
			cancelHooks(fmt.Errorf("the restore failed: %w", err))
		}
		r.hookWG.Wait()
		cancelHooks(nil)
	}()
	if err := r.types.refresh(); err != nil {
		return err
	}
	keep, err := r.filter(ctx)
	if err != nil {
		return err
	}
	checked, err := r.checkIntegrity(ctx)
	if err != nil {
		return err
	}
	sp, err := newSpool(r.e.WorkDir)
	if err != nil {
		return err
	}
	defer func() { _ = sp.close() }()
	r.spool = sp
	if len(r.actions) > 0 {
		sp.index = map[string]spoolRef{}
		r.claimed = map[string]bool{}
	}

	rc, err := r.store.GetBackupContents(ctx, r.b.Name)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("backup %q has no archive in its storage location (%s)", r.b.Name, storage.BackupContentsFile(r.b.Name))
	}
	if err != nil {
		return fmt.Errorf("reading backup %q: %w", r.b.Name, err)
	}
	tarball := integrity.NewReading(rc, storage.BackupContentsFile(r.b.Name), checked)
	err = sp.fill(tarball, r.e.Limits, keep)
	if err == nil {
		err = tarball.Finish()
	}
	_ = rc.Close()
	if err != nil && checked.SHA256 != "" {
		if named := r.tarballDiffers(ctx); named != nil {
			return named
		}
	}
	if err != nil {
		return fmt.Errorf("reading the archive of backup %q: %w", r.b.Name, err)
	}
	if err := r.loadSnapshots(ctx); err != nil {
		return err
	}
	if err := r.loadCSI(ctx); err != nil {
		return err
	}
	if err := r.loadPodVolumeBackups(ctx); err != nil {
		return err
	}
	// The snapshot objects no restored claim needs and the filters left
	// out were spooled, but are not restored: they are not counted.
	r.total = sp.total() - len(r.csi.skip)
	r.report(true)

	for _, gr := range restoreOrder(sp.groupResources()) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore stopped before it finished: %w", err)
		}
		if err := r.restoreType(ctx, sp, gr); err != nil {
			return err
		}
	}
	if r.dry == nil {
		// A dry run's owners got no UIDs to point at, and it started no
		// volume restores.
		r.applyFixups(ctx)
		r.waitPodVolumeRestores(ctx)
	}
	r.report(true)
	return nil
}

// filter builds the per-item decision from the restore's spec, with
// Velero's include/exclude rules.
func (r *run) filter(ctx context.Context) (filter, error) {
	spec := r.rs.Spec
	bs := &v1.BackupSpec{
		IncludedNamespaces:      spec.IncludedNamespaces,
		ExcludedNamespaces:      spec.ExcludedNamespaces,
		IncludedResources:       spec.IncludedResources,
		ExcludedResources:       spec.ExcludedResources,
		IncludeClusterResources: spec.IncludeClusterResources,
		LabelSelector:           spec.LabelSelector,
		OrLabelSelectors:        spec.OrLabelSelectors,
	}
	// Discovery was just read (execute refreshes it first); reading it
	// again for the filter's names would only cost another round trip.
	resolver := selection.NewDiscoveryResolver(r.types.resourceLists())
	resources, errs := selection.NewResourceFilter(bs, resolver)
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid filters: %w", errors.Join(errs...))
	}
	if err := r.loadActions(resolver); err != nil {
		return nil, err
	}
	labels, err := selection.NewLabelMatcher(bs)
	if err != nil {
		return nil, err
	}
	fine, err := r.fineFilters(ctx, resolver, resources)
	if err != nil {
		return nil, err
	}
	if err := r.noteCSIExclusions(spec.ExcludedResources, resolver); err != nil {
		return nil, err
	}
	namespaces := resources.Namespaces()
	// admit is what the restore's filters say of an item.
	admit := func(ref archive.ItemRef, gr schema.GroupResource, data []byte) (bool, error) {
		if !resources.ShouldRestoreResource(gr, ref.Namespace != "") {
			return false, nil
		}
		if ref.Namespace != "" && !namespaces.ShouldInclude(ref.Namespace) {
			return false, nil
		}
		if gr == grNamespaces && !namespaces.ShouldInclude(ref.Name) {
			return false, nil
		}
		if fine != nil {
			// The policy's rules replace the spec's label selector where
			// they apply; they judge the item by the backup's namespace.
			head, err := readHead(data)
			if err != nil {
				return false, err
			}
			return fine.RestoreSelects(gr, head.Kind, ref.Namespace, ref.Name, head.Metadata.Labels, labels), nil
		}
		if !labels.Selects() {
			return true, nil
		}
		l, err := itemLabels(data)
		if err != nil {
			return false, err
		}
		return labels.Matches(l), nil
	}
	keep := func(ref archive.ItemRef, data []byte) (bool, error) {
		if nonRestorable[ref.GroupResource] {
			return false, nil
		}
		gr := schema.ParseGroupResource(ref.GroupResource)
		if gr == csisnapshot.VolumeSnapshots || gr == csisnapshot.VolumeSnapshotContents {
			return r.spoolSnapshotItem(gr, ref, data, namespaces.ShouldInclude, admit)
		}
		return admit(ref, gr, data)
	}
	if len(r.actions) > 0 {
		// Restore item actions may add owner references the archive
		// lacks: every UID is kept for them.
		return keep, nil
	}
	r.wantedOwners = map[string]bool{}
	return func(ref archive.ItemRef, data []byte) (bool, error) {
		ok, err := keep(ref, data)
		if ok && err == nil {
			r.noteOwners(data)
		}
		return ok, err
	}, nil
}

// fineFilters resolves the fine-grained filters of the restore's resource
// policy (validated before the run), nil without; their warnings and the
// kinds the spec's resource filters exclude anyway go to the restore's
// warnings, as Velero logs them.
func (r *run) fineFilters(ctx context.Context, resolver selection.ResourceResolver, resources *selection.ResourceFilter) (*selection.FineFilters, error) {
	if r.rs.Spec.ResourcePolicy == nil || r.e.acc.Reader == nil {
		return nil, nil
	}
	pol, err := LoadPolicy(ctx, r.e.acc.Reader, r.rs)
	if err != nil {
		return nil, err
	}
	fine, err := selection.NewFineFilters(policyfilters.Spec(pol), resolver, selection.ForRestore)
	if err != nil {
		return nil, fmt.Errorf("spec.resourcePolicy: %w", err)
	}
	fine.WarnExcluded(func(gr schema.GroupResource) bool { return resources.ShouldIncludeResource(gr, true) },
		"the restore's resource filters (spec.includedResources/excludedResources)")
	for _, w := range fine.Warnings() {
		r.results.Warning("", "spec.resourcePolicy: "+w)
	}
	return fine, nil
}

// restoreType creates every spooled item of one type, a few at a time.
func (r *run) restoreType(ctx context.Context, sp *spool, grs string) error {
	gr := schema.ParseGroupResource(grs)
	items := make(chan spooledItem)
	var wg sync.WaitGroup
	var created []string
	var createdMu sync.Mutex
	for range createWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				name, ok := r.restoreItem(ctx, gr, it)
				if ok && gr == grCRDs && r.dry == nil {
					createdMu.Lock()
					created = append(created, name)
					createdMu.Unlock()
				}
				r.restored.Add(1)
				r.report(false)
			}
		}()
	}
	err := sp.each(grs, func(it spooledItem) error {
		if r.csi.skipped(gr, it) {
			return nil
		}
		select {
		case items <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(items)
	wg.Wait()
	if err != nil {
		return err
	}
	if gr == grCRDs && len(created) > 0 {
		r.waitEstablished(ctx, created)
		if err := r.types.refresh(); err != nil {
			return err
		}
	}
	return nil
}

// restoreItem creates one item; problems are recorded, not returned. It
// reports the item's name and whether it exists in the cluster now. Every
// item passes here, additional items of restore item actions included, so
// this is where an item's JSON and scope are checked against its path.
func (r *run) restoreItem(ctx context.Context, gr schema.GroupResource, it spooledItem) (string, bool) {
	if !r.claim(gr, it.Namespace, it.Name) {
		return it.Name, true
	}
	ns, name := r.tf.target(gr, it.Namespace, it.Name)
	// Integers stay int64 (jsonmap decodes as utiljson.Unmarshal does):
	// encoding/json would make every number a float64 and round those
	// past 2^53 on the way back out.
	content, err := jsonmap.Decode(it.JSON)
	if err != nil {
		r.itemError(ns, gr, it.Name, fmt.Errorf("archive entry %q: decoding the stored item: %w", it.Path, err))
		return "", false
	}
	obj := &unstructured.Unstructured{Object: content}
	gv, err := checkStored(it, gr, obj)
	if err != nil {
		r.itemError(ns, gr, it.Name, err)
		return "", false
	}
	info, err := r.types.lookup(gr, gv.Version)
	if err != nil {
		obj.SetNamespace(ns)
		obj.SetName(name)
		if !r.unchecked(gr, obj, ns != "") {
			r.itemError(ns, gr, it.Name, err)
		}
		return "", false
	}
	if err := checkServed(it, obj, info); err != nil {
		r.itemError(ns, gr, it.Name, err)
		return "", false
	}
	if gr == grPVs && r.rs.Spec.RestorePVs != nil && !*r.rs.Spec.RestorePVs {
		// The decision is recorded so nobody wonders where the volume went.
		r.log.Info("persistent volume not restored: spec.restorePVs is false", "name", obj.GetName())
		r.skip(gr, obj, "spec.restorePVs is false")
		return obj.GetName(), false
	}
	if gr == grPVs && r.provisionAnew(obj) {
		return obj.GetName(), false
	}
	if gr == grPVs && r.dry == nil {
		withData, err := r.restoreVolumeData(ctx, obj)
		if err != nil {
			r.itemError("", gr, it.Name, err)
			r.record(obj, "failed")
			return "", false
		}
		obj = withData
	}
	var fromBackup *unstructured.Unstructured
	if len(r.actions) > 0 {
		fromBackup = obj.DeepCopy()
	}
	var stored *unstructured.Unstructured
	if gr == grPVCs || gr.Group == csisnapshot.Group {
		stored = obj.DeepCopy()
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	r.tf.prepare(obj, gr, info)
	if stored != nil {
		if err := r.prepareCSI(ctx, gr, obj, stored, it.Namespace); err != nil {
			r.itemError(ns, gr, it.Name, err)
			r.record(obj, "failed")
			return "", false
		}
	}
	var podVolumes []podVolumeSource
	if gr == grPods {
		podVolumes = r.podVolumesOf(it.Namespace, it.Name, obj)
		if len(podVolumes) > 0 && r.e.PodVolumes == nil {
			r.results.Warning(ns, fmt.Sprintf("the volumes of pod %s were backed up by file-system backup; this server restores no pod volumes, so they start empty", qualified(ns, name)))
			podVolumes = nil
		}
		if err := r.addRestoreWait(ctx, obj, podVolumes); err != nil {
			r.itemError(ns, gr, name, err)
			r.record(obj, "failed")
			return "", false
		}
		if err := r.addInitHooks(obj); err != nil {
			r.itemError(ns, gr, name, err)
			r.record(obj, "failed")
			return "", false
		}
	}
	if fromBackup != nil {
		if obj = r.runActions(ctx, gr, it.Namespace, obj, fromBackup); obj == nil {
			return it.Name, false
		}
		// An action may rename the item or change its content, but it is
		// created in the namespace the mapping gives its path, as Velero
		// does: the filters admitted that namespace, not another.
		obj.SetNamespace(ns)
	}
	if gr == grPVCs {
		r.unbindFromUnrestoredVolume(obj)
	}
	if info.Namespaced {
		if err := r.ensureNamespace(ctx, ns); err != nil {
			r.itemError(ns, gr, obj.GetName(), err)
			return "", false
		}
	}
	r.rewriteOwners(obj, info)
	if r.unchecked(gr, obj, info.Namespaced) {
		return obj.GetName(), true
	}

	client := r.client(info, ns)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Only a created pod is read back whole (its hooks and volume restores
	// need it); of anything else the restore keeps the UID alone.
	var createdObj *unstructured.Unstructured
	var uid types.UID
	if gr == grPods {
		if createdObj, err = client.Create(cctx, obj, r.createOptions()); err == nil {
			uid = createdObj.GetUID()
		}
	} else {
		uid, err = r.createForUID(cctx, info, ns, obj)
	}
	switch {
	case err == nil && r.dry != nil:
		r.recordUID(gv.Group, info.Kind, ns, obj.GetName(), uid)
		r.record(obj, "created")
		r.verdict(gr, ns, obj.GetName(), v1.DryRunCreate, "")
		switch gr {
		case grCRDs:
			r.dry.markType(obj)
		case grNamespaces:
			r.dry.markNamespace(obj.GetName())
		}
		return obj.GetName(), true
	case err == nil:
		r.recordUID(gv.Group, info.Kind, ns, obj.GetName(), uid)
		r.record(obj, "created")
		if gr == grPVCs {
			r.claimCreated(ns, name, obj.GetName())
		}
		if gr == grPods {
			// Only pods this restore created, as in Velero.
			r.startExecHooks(createdObj)
			if len(podVolumes) > 0 {
				r.startPodVolumeRestores(ctx, createdObj, it.Namespace, podVolumes)
			}
		}
		return obj.GetName(), true
	case apierrors.IsAlreadyExists(err):
		r.existing(cctx, client, obj, gr, info)
		return obj.GetName(), true
	default:
		r.itemError(ns, gr, obj.GetName(), fmt.Errorf("creating: %w", err))
		r.record(obj, "failed")
		return obj.GetName(), false
	}
}

func (r *run) client(info resourceInfo, ns string) dynamic.ResourceInterface {
	if info.Namespaced {
		return r.dyn.Resource(info.GVR).Namespace(ns)
	}
	return r.dyn.Resource(info.GVR)
}

// existing handles an item that is already in the cluster, as the spec's
// existingResourcePolicy says: "none" keeps the live object and warns when
// it differs from the backup; "update" patches it to the backed-up state.
func (r *run) existing(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, gr schema.GroupResource, info resourceInfo) {
	ns, name := obj.GetNamespace(), obj.GetName()
	live, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r.itemError(ns, gr, name, fmt.Errorf("it already exists, and reading it failed: %w", err))
		r.record(obj, "failed")
		return
	}
	r.recordUID(info.GVR.Group, info.Kind, ns, name, live.GetUID())
	normalized := live.DeepCopy()
	r.tf.prepare(normalized, gr, info)
	// Owner references point at UIDs of this cluster on both sides now.
	normalized.SetOwnerReferences(live.GetOwnerReferences())
	patch, err := mergePatch(normalized, obj)
	if err != nil {
		r.itemError(ns, gr, name, err)
		r.record(obj, "failed")
		return
	}
	if patch == nil {
		r.skip(gr, obj, "it exists, as the backup has it")
		return
	}
	if r.rs.Spec.ExistingResourcePolicy != v1.PolicyTypeUpdate {
		r.results.Warning(ns, fmt.Sprintf("could not restore %s %s: it already exists and differs from the backup (existingResourcePolicy is none; set it to update to overwrite)", gr, qualified(ns, name)))
		r.skip(gr, obj, "it exists and differs from the backup; existingResourcePolicy none keeps the live object (update would patch it)")
		return
	}
	if _, err := client.Patch(ctx, name, types.MergePatchType, patch, r.patchOptions()); err != nil {
		r.results.Warning(ns, fmt.Sprintf("could not update the existing %s %s: %v", gr, qualified(ns, name), err))
		r.record(obj, "failed")
		r.verdict(gr, ns, name, v1.DryRunFail, fmt.Sprintf("updating the existing object: %v", err))
		return
	}
	r.record(obj, "updated")
	r.verdict(gr, ns, name, v1.DryRunUpdate, "")
}

// ensureNamespace creates a namespace the restore writes into when it does
// not exist yet (the backup may not hold it, or it was mapped to a new name).
func (r *run) ensureNamespace(ctx context.Context, ns string) error {
	r.mu.Lock()
	known := r.namespaces[ns]
	r.mu.Unlock()
	if known {
		return nil
	}
	// Eight workers meet a new namespace at once; one of them checks it.
	_, err, _ := r.nsGroup.Do(ns, func() (any, error) { return nil, r.createNamespace(ctx, ns) })
	return err
}

func (r *run) createNamespace(ctx context.Context, ns string) error {
	r.mu.Lock()
	known := r.namespaces[ns]
	r.mu.Unlock()
	if known {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := r.cs.CoreV1().Namespaces().Get(cctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			v1.BackupNameLabel: v1.LabelValue(r.b.Name), v1.RestoreNameLabel: v1.LabelValue(r.rs.Name),
		}}}
		_, err = r.cs.CoreV1().Namespaces().Create(cctx, created, r.createOptions())
		switch {
		case err == nil && r.dry != nil:
			r.dry.markNamespace(ns)
			r.log.Info("namespace would be created (dry run)", "namespace", ns)
		case err == nil:
			r.log.Info("created namespace", "namespace", ns)
		}
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("making sure namespace %s exists: %w", ns, err)
	}
	r.mu.Lock()
	r.namespaces[ns] = true
	r.mu.Unlock()
	return nil
}

// waitEstablished waits (bounded) for restored CRDs to serve their custom
// resources, which are restored next.
func (r *run) waitEstablished(ctx context.Context, names []string) {
	sort.Strings(names)
	crds := r.dyn.Resource(grCRDs.WithVersion("v1"))
	deadline := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			obj, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(obj) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.results.Warning("", fmt.Sprintf("CustomResourceDefinition %s was not established within a minute; its custom resources may fail to restore", name))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func established(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (r *run) itemError(ns string, gr schema.GroupResource, name string, err error) {
	msg := fmt.Sprintf("error restoring %s %s: %v", gr, qualified(ns, name), err)
	r.results.Error(ns, msg)
	r.verdict(gr, ns, name, v1.DryRunFail, err.Error())
	r.log.Error("restoring item failed", "resource", gr.String(), "namespace", ns, "name", name, "error", err)
}

func (r *run) record(obj *unstructured.Unstructured, action string) {
	key := obj.GetAPIVersion() + "/" + obj.GetKind()
	id := qualified(obj.GetNamespace(), obj.GetName())
	listed := action
	if r.dry != nil {
		// A dry run's list says what a restore would do, in words no
		// reader can take for what happened.
		listed = dryRunActions[action]
	}
	r.mu.Lock()
	r.resourceList.Add(key, id+"("+listed+")")
	if key == "v1/PersistentVolumeClaim" && action == "created" && r.dry == nil {
		r.createdClaims[id] = true
	}
	r.mu.Unlock()
}

func (r *run) report(final bool) {
	r.mu.Lock()
	now := time.Now()
	if !final && now.Sub(r.lastReport) < time.Second {
		r.mu.Unlock()
		return
	}
	r.lastReport = now
	r.mu.Unlock()
	r.progress(v1.RestoreProgress{TotalItems: r.total, ItemsRestored: int(r.restored.Load())})
}

// upload writes the restore's files next to its backup.
func (r *run) upload(ctx context.Context, res results.Results) error {
	name := r.rs.Name
	logs, err := r.log.Reader()
	if err != nil {
		return err
	}
	return errors.Join(
		r.store.PutRestoreResults(ctx, name, res),
		r.store.PutRestoreResourceList(ctx, name, r.resourceList),
		r.store.PutRestoreItemOperations(ctx, name, []any{}),
		r.store.PutRestoreVolumeInfo(ctx, name, r.restoredVolumes()),
		r.store.PutRestoreLog(ctx, name, logs),
	)
}

// restoredVolumes is the restore's volume information, never null (Velero
// writes an empty list).
func (r *run) restoredVolumes() []volumefiles.RestoreVolumeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.volumeInfos == nil {
		return []volumefiles.RestoreVolumeInfo{}
	}
	sort.Slice(r.volumeInfos, func(i, j int) bool {
		a, b := r.volumeInfos[i], r.volumeInfos[j]
		if a.PVName != b.PVName {
			return a.PVName < b.PVName
		}
		return a.PVCNamespace+"/"+a.PVCName < b.PVCNamespace+"/"+b.PVCName
	})
	return r.volumeInfos
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
