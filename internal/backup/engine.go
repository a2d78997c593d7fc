// Package backup collects a cluster's resources and streams them into a
// Velero-compatible backup in object storage. It lists each resource type
// once (or once per namespace when only a few namespaces are wanted), pages
// straight from the API server into the archive, and never holds the whole
// backup in memory.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/itemops"
	"github.com/lifeboat-io/lifeboat/internal/resourcelist"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/runlog"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// Engine runs backups against one cluster.
type Engine struct {
	discovery discovery.DiscoveryInterface
	lister    pageLister
	// ListWorkers bounds concurrent LISTs.
	ListWorkers int
	// Plugins supplies backup item actions; nil runs none.
	Plugins Plugins
	// Log receives one line per backup (start, end) and per failure.
	Log *slog.Logger
	// Client reads what volume decisions need (the resource policy,
	// claims, pods), around any cache.
	Client crclient.Client
	// WorkDir holds the run logs; "" is the system temp dir.
	WorkDir string
	// Limits are the restore's and deletion's archive limits: a backup
	// that passes them fails here, naming the item, instead of being
	// written and then refused when it is restored or deleted.
	Limits archive.Limits
	// SnapshotLocations opens the VolumeSnapshotLocations a backup
	// snapshots through; nil refuses a backup that names any.
	SnapshotLocations SnapshotLocations
	// Hooks runs backup hooks' commands in pods; nil fails every hook.
	Hooks hooks.Executor
	// Repositories gets the file-system backup repositories ready; nil
	// leaves fs-backup volumes out with a warning.
	Repositories RepositoryEnsurer
	// FSBackupTimeout bounds the wait for a backup's PodVolumeBackups
	// (Velero's --fs-backup-timeout); 0 is DefaultFSBackupTimeout.
	FSBackupTimeout time.Duration
	// podVolumePoll is the longest wait between two looks at the
	// PodVolumeBackups (the first come sooner); 0 is 2s.
	podVolumePoll time.Duration
}

// SnapshotLocations opens a VolumeSnapshotLocation for use: the
// VolumeSnapshotter's name and the config to Init it with, credentials
// included (locations.Resolver).
type SnapshotLocations interface {
	SnapshotLocation(ctx context.Context, name string) (provider string, config map[string]string, err error)
}

// NewEngine builds an engine over the cluster acc reaches.
func NewEngine(acc *cluster.Access, listWorkers int, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{
		discovery:   acc.Discovery,
		lister:      pageLister{client: acc.Typed.CoreV1().RESTClient()},
		ListWorkers: listWorkers,
		Log:         log,
		Client:      acc.Client,
		Hooks:       hooks.NewRemoteExecutor(acc.Config, acc.Typed.CoreV1().RESTClient()),
	}
}

// ProgressFunc receives the running counts of a backup, at most once a second.
type ProgressFunc func(v1.BackupProgress)

// Outcome is how a backup ended: the status fields the caller records.
type Outcome struct {
	Phase v1.BackupPhase
	// Operations counts the asynchronous operations started; the backup
	// is WaitingForPluginOperations until they end.
	Operations    int
	FailureReason string
	Warnings      int
	Errors        int
	Progress      v1.BackupProgress
	Completion    time.Time
	// VolumeSnapshotsAttempted and VolumeSnapshotsCompleted count the
	// native snapshots, as Velero's status does: `backup describe` shows
	// them, and `backup delete --force` names the snapshots it leaves
	// behind from them.
	VolumeSnapshotsAttempted, VolumeSnapshotsCompleted int
	// CSIVolumeSnapshotsAttempted and CSIVolumeSnapshotsCompleted count
	// the CSI snapshots, as Velero's status does.
	CSIVolumeSnapshotsAttempted, CSIVolumeSnapshotsCompleted int
	// StoredNothing: the run failed before it wrote anything to the
	// storage location; NameTaken: because another backup of that name is
	// stored there.
	StoredNothing, NameTaken bool
	// TarballBytes is the size of the archive written, compressed
	// (velero_backup_tarball_size_bytes).
	TarballBytes int64
	// HooksAttempted and HooksFailed count the exec hooks, as Velero's
	// status.hookStatus does.
	HooksAttempted, HooksFailed int
	// DigestsSHA256 is the sha256 of the digests file the backup wrote
	// (v1.DigestsAnnotation), "" when it wrote none.
	DigestsSHA256 string
}

// Run backs up what b's spec selects into store. b must carry the status the
// backup started with (phase InProgress, start time, expiration); Run writes
// b.Status as the final `velero-backup.json`, last, so that a backup is only
// visible in the store once everything else is there. Fatal problems
// (storage failures, a cancelled context) end in phase Failed, with every
// object already written removed except the log and the failed backup's
// metadata.
func (e *Engine) Run(ctx context.Context, b *v1.Backup, store *storage.BackupStore, progress ProgressFunc) Outcome {
	r, err := newRun(e, b, store, progress)
	if err != nil {
		return Outcome{Phase: v1.BackupPhaseFailed, FailureReason: err.Error(), Completion: time.Now(), StoredNothing: true}
	}
	defer r.close()
	return r.execute(ctx)
}

// run is the state of one backup.
type run struct {
	e        *Engine
	b        *v1.Backup
	store    *storage.BackupStore
	progress ProgressFunc
	log      *runlog.Log
	results  results.Recorder
	// resourceList maps "v1/ConfigMap" to "ns/name" entries, as Velero
	// writes it; kept on local disk, not in memory, at scale.
	resourceList *resourcelist.List
	// namespacesWithItems are the namespaces that items were stored from.
	namespacesWithItems map[string]bool
	perType             map[schema.GroupResource]int

	// Set by plan: the filters, the served types, and the item actions.
	resources *selection.ResourceFilter
	// fine is the resource policy's fine-grained filters, nil without.
	fine        *selection.BackupFineFilter
	typesByGR   map[schema.GroupResource]resourceType
	actions     []itemAction
	typeActions map[schema.GroupResource][]itemAction
	// stored remembers what was written when item actions can add items,
	// so that every item is stored once.
	stored map[string]bool
	// actionBackup is what item actions get as the backup: one unchanging
	// copy for the whole run (plugin clients encode it once), without
	// managed fields.
	actionBackup *v1.Backup
	// operations are the asynchronous operations item actions started;
	// actions run concurrently, so opsMu guards them.
	operations []itemops.BackupOperation
	opsMu      sync.Mutex
	backedUp   int
	lastReport time.Time

	// volumes are the stored PVs, claims and pods; after the archive, each
	// volume's decision fills volumeInfos and, for snapshots, snapshots.
	volumes     *storedVolumes
	volumeInfos []volumefiles.BackupVolumeInfo
	snapshots   []volumefiles.Snapshot
	// podVolumeBackups are the backup's PodVolumeBackups as they ended.
	podVolumeBackups []v1.PodVolumeBackup

	// hookRules are the spec's resource hooks; hooksAttempted and
	// hooksFailed count the hooks run; deferredPost are the post hooks
	// that wait for the volume step.
	hookRules                   *hooks.BackupRules
	hooksAttempted, hooksFailed int
	deferredPost                []*podHooks

	// csi holds the backup's CSI snapshots.
	csi *csiState

	// wrote is set once the run starts writing to the store.
	wrote bool
	// tarballBytes counts the compressed archive as it is written.
	tarballBytes int64

	// digests records every file the run stores (r.store records into
	// it) and items every tarball entry, for the digests file written
	// last (internal/integrity).
	digests       *storage.DigestRecorder
	items         *integrity.ItemDigests
	digestsSHA256 string
}

func newRun(e *Engine, b *v1.Backup, store *storage.BackupStore, progress ProgressFunc) (*run, error) {
	lg, err := runlog.Create(e.WorkDir, "backup", b.Namespace+"/"+b.Name)
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(v1.BackupProgress) {}
	}
	items, err := integrity.NewItemDigests(e.WorkDir)
	if err != nil {
		lg.Discard()
		return nil, err
	}
	digests := storage.NewDigestRecorder()
	return &run{e: e, b: b, store: store.Recording(digests), progress: progress, log: lg, resourceList: resourcelist.New(e.WorkDir), namespacesWithItems: map[string]bool{},
		perType: map[schema.GroupResource]int{}, typeActions: map[schema.GroupResource][]itemAction{}, volumes: newStoredVolumes(), csi: newCSIState(),
		digests: digests, items: items}, nil
}

func (r *run) close() {
	r.log.Discard()
	if err := r.resourceList.Close(); err != nil {
		r.e.Log.Warn("removing the resource list's temporary files", "backup", r.b.Namespace+"/"+r.b.Name, "error", err)
	}
	if err := r.items.Close(); err != nil {
		r.e.Log.Warn("removing the item digests' temporary file", "backup", r.b.Namespace+"/"+r.b.Name, "error", err)
	}
}

func (r *run) execute(ctx context.Context) Outcome {
	name := r.b.Name
	start := time.Now()
	r.log.Info("starting backup")
	r.e.Log.Info("backup started", "backup", r.b.Namespace+"/"+name)

	err := r.collectAndUpload(ctx)
	out := Outcome{Completion: time.Now(), Progress: v1.BackupProgress{TotalItems: r.backedUp, ItemsBackedUp: r.backedUp}}
	res := r.results.Snapshot()
	out.Warnings, out.Errors = res.Warnings.Count(), res.Errors.Count()
	switch {
	case err != nil:
		out.Phase, out.FailureReason = v1.BackupPhaseFailed, err.Error()
	case len(r.operations) > 0 && out.Errors > 0:
		out.Phase = v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
	case len(r.operations) > 0:
		out.Phase = v1.BackupPhaseWaitingForPluginOperations
	case out.Errors > 0:
		out.Phase = v1.BackupPhasePartiallyFailed
	default:
		out.Phase = v1.BackupPhaseCompleted
	}
	out.Operations = len(r.operations)
	out.TarballBytes = r.tarballBytes
	out.HooksAttempted, out.HooksFailed = r.hooksAttempted, r.hooksFailed
	out.VolumeSnapshotsAttempted = len(r.snapshots)
	for _, s := range r.snapshots {
		if s.Status.Phase == volumefiles.SnapshotPhaseCompleted {
			out.VolumeSnapshotsCompleted++
		}
	}
	for _, s := range r.csi.snaps {
		if s.skipped {
			continue
		}
		out.CSIVolumeSnapshotsAttempted++
		if s.err == nil && s.vsc != nil {
			out.CSIVolumeSnapshotsCompleted++
		}
	}
	r.log.Info("backup finished", "phase", out.Phase, "items", r.backedUp, "warnings", out.Warnings,
		"errors", out.Errors, "duration", time.Since(start).Round(time.Millisecond).String())

	if err == nil {
		if err = r.finish(ctx, out, res); err != nil {
			out.Phase, out.FailureReason = v1.BackupPhaseFailed, err.Error()
			r.log.Error("writing the backup's files failed", "error", err)
		} else {
			out.DigestsSHA256 = r.digestsSHA256
		}
	}
	// The CSI snapshots stay with a stored backup and go with a failed one.
	r.releaseCSI(ctx, out.Phase != v1.BackupPhaseFailed)
	// A run that wrote nothing must not clean up: under its name is
	// another backup (its name was taken), or nothing.
	out.StoredNothing = !r.wrote
	var exists *existsError
	out.NameTaken = errors.As(err, &exists)
	if out.Phase == v1.BackupPhaseFailed && r.wrote {
		r.abandon(ctx, out)
	}
	r.e.Log.Info("backup ended", "backup", r.b.Namespace+"/"+name, "phase", out.Phase, "items", r.backedUp,
		"warnings", out.Warnings, "errors", out.Errors, "duration", time.Since(start).Round(time.Millisecond).String(),
		"failureReason", out.FailureReason)
	return out
}

// collectAndUpload streams the archive to the store while the cluster is
// listed. Only storage and cancellation errors come back; per-type list
// failures are recorded as backup errors.
func (r *run) collectAndUpload(ctx context.Context) error {
	exists, err := r.store.BackupExists(ctx, r.b.Name)
	if err != nil {
		return fmt.Errorf("checking the storage location for an existing backup: %w", err)
	}
	if exists {
		return &existsError{name: r.b.Name, location: r.b.Spec.StorageLocation}
	}
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}

	// Post hooks held back for the volume step run whatever happens to the
	// backup: they undo what the pre hooks did.
	defer r.runDeferredPostHooks(ctx)

	// From here on the run writes under the backup's name: a failure must
	// clean up, and a deletion of the Backup must look in the store.
	r.wrote = true
	pr, pw := io.Pipe()
	uploadDone := make(chan error, 1)
	go func() {
		err := r.store.PutBackupContents(ctx, r.b.Name, pr)
		// Unblock the writer if the upload gave up early.
		pr.CloseWithError(errors.Join(err, errors.New("upload ended")))
		uploadDone <- err
	}()

	werr := r.writeArchive(ctx, p, &countingWriter{w: pw, n: &r.tarballBytes})
	pw.CloseWithError(werr)
	uerr := <-uploadDone
	if werr != nil && errors.Is(uerr, werr) {
		// The upload stopped because the archive did (an item past the
		// archive limits, say): that is the cause to report.
		return werr
	}
	if uerr != nil {
		return fmt.Errorf("uploading the backup archive: %w", uerr)
	}
	if werr != nil {
		return werr
	}
	if err := r.items.Upload(ctx, r.store, r.b.Name); err != nil {
		return fmt.Errorf("uploading the backup's item digests: %w", err)
	}
	return r.decideVolumes(ctx)
}

func (r *run) writeArchive(ctx context.Context, p *plan, w io.Writer) error {
	startedAt := r.b.CreationTimestamp.Time
	if r.b.Status.StartTimestamp != nil {
		startedAt = r.b.Status.StartTimestamp.Time
	}
	aw := archive.NewWriter(w, startedAt, r.e.Limits)
	aw.RecordEntries(r.items)
	if err := aw.WriteVersion(); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	c := &collector{lister: r.e.lister, window: r.e.ListWorkers}
	onListError := func(job listJob, err error) {
		r.results.Error(job.Namespace, err.Error())
		r.log.Error("listing failed", "resource", job.Type.GroupResource().String(), "namespace", job.Namespace, "error", err)
	}
	writtenCRDs := map[string]bool{}
	consume := func(job listJob, pg *page) error {
		gr := job.Type.GroupResource()
		var hooked map[int]*podHooks
		var held map[int]bool
		switch gr {
		case podResource:
			hooked = r.hooksForPage(pg.Items)
		case pvcResource:
			held = r.claimsToHold(ctx, pg.Items)
		}
		pre := r.applyActionsToPage(ctx, job.Type, pg.Items, func(i int) bool { return hooked[i] != nil || held[i] })
		if gr == pvcResource && r.csi != nil {
			r.snapshotPage(ctx, job.Type, pg.Items, pre, func(i int) bool {
				return held[i] || (job.WriteIf != nil && !job.WriteIf(pg.Items[i]))
			})
		}
		for i, it := range pg.Items {
			if job.WriteIf != nil && !job.WriteIf(it) {
				continue
			}
			if held[i] {
				r.csi.held = append(r.csi.held, heldClaim{rt: job.Type, it: it})
				continue
			}
			var err error
			if ph := hooked[i]; ph != nil {
				err = r.writeHookedPod(ctx, aw, job.Type, it, ph)
			} else {
				err = r.writeItem(ctx, aw, job.Type, it, pre[i], 0)
			}
			if err != nil {
				return err
			}
			if gr == crdResource {
				writtenCRDs[it.Name] = true
			}
		}
		r.reportProgress(c, false)
		return nil
	}
	if err := c.run(ctx, p.jobs, onListError, consume); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("backup stopped before it finished: %w", context.Cause(ctx))
		}
		return err
	}
	if err := r.finishCSI(ctx, aw); err != nil {
		return err
	}
	types := make([]schema.GroupResource, 0, len(r.perType))
	for gr, n := range r.perType {
		if n > 0 {
			types = append(types, gr)
		}
	}
	if p.crdType != nil {
		if err := r.writeCRDs(ctx, aw, *p.crdType, types, writtenCRDs); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("finishing the archive: %w", err)
	}
	sort.Slice(types, func(i, j int) bool { return types[i].String() < types[j].String() })
	for _, gr := range types {
		r.log.Info("backed up resource type", "resource", gr.String(), "items", r.perType[gr])
	}
	r.reportProgress(c, true)
	return nil
}

func (r *run) addToResourceList(rt resourceType, namespace, name string) {
	entry := name
	if namespace != "" {
		entry = namespace + "/" + name
	}
	r.resourceList.Add(rt.resourceListKey(), entry)
}

func (r *run) reportProgress(c *collector, final bool) {
	now := time.Now()
	if !final && now.Sub(r.lastReport) < time.Second {
		return
	}
	r.lastReport = now
	total := int(c.total.Load())
	if final || total < r.backedUp {
		total = r.backedUp
	}
	r.progress(v1.BackupProgress{TotalItems: total, ItemsBackedUp: r.backedUp})
}

// finish writes the small files and, last, the backup's metadata.
func (r *run) finish(ctx context.Context, out Outcome, res results.Results) error {
	name := r.b.Name
	steps := []struct {
		what string
		put  func() error
	}{
		{"resource list", func() error { return r.store.PutResourceList(ctx, name, r.resourceList) }},
		{"results", func() error { return r.store.PutBackupResults(ctx, name, res) }},
		{"item operations", func() error {
			ops := r.operations
			if ops == nil {
				ops = []itemops.BackupOperation{}
			}
			return r.store.PutItemOperations(ctx, name, ops)
		}},
		{"volume snapshots", func() error { return r.store.PutVolumeSnapshots(ctx, name, r.snapshots) }},
		{"pod volume backups", func() error {
			if len(r.podVolumeBackups) == 0 {
				return r.store.PutPodVolumeBackups(ctx, name, nil)
			}
			return r.store.PutPodVolumeBackups(ctx, name, r.podVolumeBackups)
		}},
		{"CSI volume snapshot classes", func() error {
			// Velero's list of the classes its CSI snapshots used.
			if len(r.csi.classes) == 0 {
				return nil
			}
			return r.store.PutCSIVolumeSnapshotClasses(ctx, name, r.csi.classes)
		}},
		{"volume info", func() error {
			infos := r.volumeInfos
			if infos == nil {
				infos = []volumefiles.BackupVolumeInfo{}
			}
			return r.store.PutVolumeInfo(ctx, name, infos)
		}},
		{"log", func() error { return r.uploadLog(ctx) }},
		{"metadata", func() error { return r.putMetadata(ctx, out) }},
	}
	for _, s := range steps {
		if err := s.put(); err != nil {
			return fmt.Errorf("uploading the backup's %s: %w", s.what, err)
		}
	}
	// The digests file goes last: it lists every file above,
	// velero-backup.json included. A backup that stops before it is a
	// backup without digests, as Velero's are.
	sum, err := integrity.WriteManifest(ctx, r.store, name, r.digests.Under(r.store.BackupDir(name)), r.items.Entries())
	if err != nil {
		return fmt.Errorf("uploading the backup's digests file: %w", err)
	}
	r.digestsSHA256 = sum
	return nil
}

func (r *run) uploadLog(ctx context.Context) error {
	rd, err := r.log.Reader()
	if err != nil {
		return err
	}
	return r.store.PutBackupLog(ctx, r.b.Name, rd)
}

func (r *run) putMetadata(ctx context.Context, out Outcome) error {
	b := r.b.DeepCopy()
	ApplyOutcome(b, out)
	data, err := MarshalMetadata(b)
	if err != nil {
		return err
	}
	return r.store.PutBackupMetadata(ctx, r.b.Name, data)
}

// abandon removes what a failed backup wrote, so nothing in the store looks
// like a usable backup, then leaves the log and the failed backup's metadata
// so that `backup logs` and `backup describe` can say what happened. A
// cancelled ctx gets a short grace period of its own for this cleanup.
func (r *run) abandon(ctx context.Context, out Outcome) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.store.DeleteBackup(cctx, r.b.Name); err != nil {
		r.e.Log.Error("removing a failed backup's files", "backup", r.b.Namespace+"/"+r.b.Name, "error", err)
		return
	}
	r.log.Error("backup failed", "reason", out.FailureReason)
	if err := r.uploadLog(cctx); err != nil {
		r.e.Log.Error("uploading a failed backup's log", "backup", r.b.Namespace+"/"+r.b.Name, "error", err)
	}
	if err := r.putMetadata(cctx, out); err != nil {
		r.e.Log.Error("uploading a failed backup's metadata", "backup", r.b.Namespace+"/"+r.b.Name, "error", err)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n *int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// existsError refuses a backup whose name is taken in the store. Nothing of
// the other backup may be touched, so such a run leaves no trace at all.
type existsError struct{ name, location string }

func (e *existsError) Error() string {
	return fmt.Sprintf("a backup named %q already exists in storage location %q; choose another name", e.name, e.location)
}

// ApplyOutcome copies how a backup ended onto its status.
func ApplyOutcome(b *v1.Backup, out Outcome) {
	b.Status.Phase = out.Phase
	b.Status.FailureReason = out.FailureReason
	b.Status.Warnings = out.Warnings
	b.Status.Errors = out.Errors
	p := out.Progress
	b.Status.Progress = &p
	b.Status.BackupItemOperationsAttempted = out.Operations
	b.Status.VolumeSnapshotsAttempted = out.VolumeSnapshotsAttempted
	b.Status.VolumeSnapshotsCompleted = out.VolumeSnapshotsCompleted
	b.Status.CSIVolumeSnapshotsAttempted = out.CSIVolumeSnapshotsAttempted
	b.Status.CSIVolumeSnapshotsCompleted = out.CSIVolumeSnapshotsCompleted
	// Set on every backup that ran, as Velero sets it, so describe shows
	// the counts even when no hook applied.
	if !out.StoredNothing {
		b.Status.HookStatus = &v1.HookStatus{HooksAttempted: out.HooksAttempted, HooksFailed: out.HooksFailed}
	}
	if !out.Completion.IsZero() {
		t := metav1.NewTime(out.Completion)
		b.Status.CompletionTimestamp = &t
	}
	if out.StoredNothing {
		reason := "NotWritten"
		if out.NameTaken {
			reason = "NameTaken"
		}
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
			Type: v1.BackupConditionStored, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: b.Generation,
			Message: "nothing was written to the storage location: " + out.FailureReason,
		})
	}
}
