package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/backup"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
)

// waitForOperationsBeforeDeletion is how often a deleted Backup whose
// plugin operations are still running is looked at again.
const waitForOperationsBeforeDeletion = 15 * time.Second

// BackupReconciler runs new Backups: it validates them, hands them to the
// backup engine and records how they ended.
type BackupReconciler struct {
	Client client.Client
	// APIReader reads around the cache. The cache can lag behind this
	// controller's own writes, and acting on a stale New or InProgress
	// would run a finished backup again or fail a running one.
	APIReader  client.Reader
	Engine     *backup.Engine
	Locations  *locations.Resolver
	DefaultTTL time.Duration
	// AddFinalizer puts v1.BackupFinalizer on every Backup, so deleting a
	// Backup object deletes its data (the server's --backup-finalizer).
	// Off, a finalizer an earlier run added is taken off again: deleting
	// the object then means what it means in Velero.
	AddFinalizer bool
	Log          *slog.Logger
	// Events records the backups' phases as Kubernetes Events.
	Events events.EventRecorder

	// running holds the backups this process is executing, to tell a backup
	// in progress here from one left InProgress by a server that died.
	running inFlight
}

// SetupWithManager registers the reconciler. Backups run one at a time, as
// in Velero: a backup is bound by the API server and the store, and two at
// once would only share them. The deletion of a Backup (a deletionTimestamp
// appearing) is let through explicitly rather than trusting it to bump the
// generation.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	deletionStarted := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Backup{}, builder.WithPredicates(predicate.Or(specChanged, deletionStarted))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("backup").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1.Backup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp != nil {
		return r.objectDeleted(ctx, &b)
	}
	if err := r.setFinalizer(ctx, &b, r.AddFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	switch b.Status.Phase {
	case "", v1.BackupPhaseNew, v1.BackupPhaseInProgress:
		if err := r.reader().Get(ctx, req.NamespacedName, &b); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	switch b.Status.Phase {
	case "", v1.BackupPhaseNew:
		if b.Status.Phase == "" && b.Annotations[v1.SyncedAnnotation] != "" {
			// A backup from storage whose status the sync is writing.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.runBackup(ctx, &b)
	case v1.BackupPhaseInProgress:
		if r.running.has(req.NamespacedName) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.failAbandoned(ctx, &b)
	}
	return ctrl.Result{}, nil
}

// failAbandoned fails a backup left InProgress by a server that stopped.
// Nothing can resume a half-written archive; say so instead of leaving the
// backup InProgress forever.
func (r *BackupReconciler) failAbandoned(ctx context.Context, b *v1.Backup) error {
	if err := r.patchStatus(ctx, b, func(s *v1.BackupStatus) {
		s.Phase = v1.BackupPhaseFailed
		s.FailureReason = "the server stopped while this backup was in progress; create a new backup"
		now := metav1.Now()
		s.CompletionTimestamp = &now
	}); err != nil {
		return err
	}
	r.removeAbandonedUploads(ctx, b)
	return nil
}

// setFinalizer puts BackupFinalizer on b, or takes it off. On, deleting
// the Backup object deletes its data too instead of leaving it behind in
// the store (where the sync would bring the Backup back). The optimistic
// lock keeps a stale cached copy from dropping another controller's
// finalizer.
func (r *BackupReconciler) setFinalizer(ctx context.Context, b *v1.Backup, on bool) error {
	if controllerutil.ContainsFinalizer(b, v1.BackupFinalizer) == on {
		return nil
	}
	err := patchObject(ctx, r.Client, b, func() {
		if on {
			controllerutil.AddFinalizer(b, v1.BackupFinalizer)
		} else {
			controllerutil.RemoveFinalizer(b, v1.BackupFinalizer)
		}
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating finalizer %s of backup %s/%s: %w", v1.BackupFinalizer, b.Namespace, b.Name, err)
	}
	return nil
}

// objectDeleted handles a Backup object with a deletionTimestamp. Only a
// Backup deleted on its own, by someone who meant this backup, has its
// data deleted: one that goes because its namespace, the Backup CRD or an
// owner is being deleted loses the finalizer and nothing else, as it would
// in Velero. Deleting a namespace must not empty a bucket.
func (r *BackupReconciler) objectDeleted(ctx context.Context, b *v1.Backup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, v1.BackupFinalizer) {
		return ctrl.Result{}, nil
	}
	log := r.Log.With("backup", b.Namespace+"/"+b.Name)
	cause := "the server runs without --backup-finalizer"
	if r.AddFinalizer {
		var err error
		if cause, err = r.bulkDeletionCause(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	if cause == "" {
		return r.requestDeletion(ctx, b)
	}
	if err := r.setFinalizer(ctx, b, false); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("backup object deleted; its data stays in the storage location", "cause", cause, "location", b.Spec.StorageLocation)
	return ctrl.Result{}, nil
}

// bulkDeletionCause says why b is being deleted when it is not b that was
// meant: its namespace or the Backup CRD is being deleted, or the garbage
// collector removes it after its owner. Empty means b itself was deleted.
func (r *BackupReconciler) bulkDeletionCause(ctx context.Context, b *v1.Backup) (string, error) {
	var ns corev1.Namespace
	if err := r.reader().Get(ctx, client.ObjectKey{Name: b.Namespace}, &ns); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading namespace %s: %w", b.Namespace, err)
	} else if err != nil || ns.DeletionTimestamp != nil {
		return "the deletion of namespace " + b.Namespace, nil
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.reader().Get(ctx, client.ObjectKey{Name: "backups." + v1.SchemeGroupVersion.Group}, crd); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the Backup CRD: %w", err)
	} else if err != nil || crd.DeletionTimestamp != nil {
		return "the removal of the Backup CRD", nil
	}
	for _, ref := range b.OwnerReferences {
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		err := r.reader().Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ref.Name}, owner)
		what := fmt.Sprintf("garbage collection after its owner %s %s", ref.Kind, ref.Name)
		switch {
		case apierrors.IsNotFound(err), err == nil && (owner.UID != ref.UID || owner.DeletionTimestamp != nil):
			return what + " was deleted", nil
		case err != nil:
			// An owner that cannot be read cannot be shown to stay: keep
			// the data, which a sync brings back, rather than guess.
			return fmt.Sprintf("%s (the owner could not be read: %v)", what, err), nil
		}
	}
	return "", nil
}

// requestDeletion turns the deletion of a Backup object into a
// DeleteBackupRequest; the deletion controller removes the finalizer once
// the backup's data is gone. While the Backup stays, the request is renewed now and then, since
// a deletion that ended with errors leaves the finalizer in place.
func (r *BackupReconciler) requestDeletion(ctx context.Context, b *v1.Backup) (ctrl.Result, error) {
	if !b.Status.Phase.IsTerminal() {
		// The cache can lag behind the end of a run that just finished here.
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	switch b.Status.Phase {
	case v1.BackupPhaseInProgress:
		// Reconciles are serial, so a backup this process runs has ended
		// before its deletion is looked at; one still InProgress is left
		// over from a stopped server and would never let the deletion in.
		if !r.running.has(client.ObjectKeyFromObject(b)) {
			if err := r.failAbandoned(ctx, b); err != nil {
				return ctrl.Result{}, err
			}
		}
	case v1.BackupPhaseWaitingForPluginOperations, v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed,
		v1.BackupPhaseFinalizing, v1.BackupPhaseFinalizingPartiallyFailed:
		// A deletion request now would be refused: the operations must end
		// first. Their end is a status change, which this controller does
		// not watch, so it looks again.
		return ctrl.Result{RequeueAfter: waitForOperationsBeforeDeletion}, nil
	}
	name, created, err := ensureBackupDeletionRequested(ctx, r.Client, r.APIReader, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if created {
		r.Log.Info("backup object deleted: requested the deletion of its data", "backup", b.Namespace+"/"+b.Name, "request", name)
	}
	return ctrl.Result{RequeueAfter: DefaultDeletionRetry}, nil
}

func (r *BackupReconciler) runBackup(ctx context.Context, b *v1.Backup) error {
	log := r.Log.With("backup", b.Namespace+"/"+b.Name)
	if msgs := backup.Validate(&b.Spec); len(msgs) > 0 {
		return r.failValidation(ctx, b, msgs)
	}
	fctx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	bsl, err := r.Locations.Find(fctx, b.Spec.StorageLocation)
	cancel()
	var nf *locations.NotFoundError
	if errors.As(err, &nf) {
		return r.failValidation(ctx, b, []string{"spec.storageLocation: " + nf.Error()})
	}
	if err != nil {
		return err
	}
	if bsl.Spec.AccessMode == v1.BackupStorageLocationAccessModeReadOnly {
		return r.failValidation(ctx, b, []string{fmt.Sprintf("spec.storageLocation: BackupStorageLocation %q is ReadOnly; choose a ReadWrite location or change its spec.accessMode", bsl.Name)})
	}
	snapshotLocations, msgs := backup.ValidateVolumes(ctx, r.reader(), b)
	if len(msgs) > 0 {
		return r.failValidation(ctx, b, msgs)
	}

	// Record the locations the backup goes to, as Velero does, so that
	// `backup get` and later deletion know where it and its snapshots are,
	// and the TTL it was given (the server's default when spec.ttl is 0),
	// so that `velero backup describe` shows the TTL the expiration came from.
	if b.Spec.StorageLocation != bsl.Name || b.Labels[v1.StorageLocationLabel] != v1.LabelValue(bsl.Name) ||
		!slices.Equal(b.Spec.VolumeSnapshotLocations, snapshotLocations) || (b.Spec.TTL.Duration == 0 && r.DefaultTTL > 0) {
		err := patchObject(ctx, r.Client, b, func() {
			b.Spec.StorageLocation = bsl.Name
			b.Spec.VolumeSnapshotLocations = snapshotLocations
			if b.Spec.TTL.Duration == 0 {
				b.Spec.TTL.Duration = r.DefaultTTL
			}
			if b.Labels == nil {
				b.Labels = map[string]string{}
			}
			b.Labels[v1.StorageLocationLabel] = v1.LabelValue(bsl.Name)
		})
		if err != nil {
			return fmt.Errorf("recording the backup's storage location: %w", err)
		}
	}

	now := metav1.Now()
	ttl := b.Spec.TTL.Duration
	if ttl == 0 {
		ttl = r.DefaultTTL
	}
	expiration := metav1.NewTime(now.Add(ttl))
	key := client.ObjectKeyFromObject(b)
	defer r.running.add(key)()
	if err := r.patchStatus(ctx, b, func(s *v1.BackupStatus) {
		s.Phase = v1.BackupPhaseInProgress
		s.StartTimestamp = &now
		s.Expiration = &expiration
		s.Version = 1
		s.FormatVersion = v1.BackupFormatVersion
		s.Progress = &v1.BackupProgress{}
	}); err != nil {
		return err
	}
	schedule := b.Labels[v1.ScheduleNameLabel]
	metrics.BackupStarted(schedule)

	var outcome backup.Outcome
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	store, err := r.Locations.Open(octx, bsl)
	if err == nil {
		err = store.IsValid(octx)
	}
	cancel()
	if err != nil {
		outcome = backup.Outcome{Phase: v1.BackupPhaseFailed, FailureReason: fmt.Sprintf("storage location %q is not usable: %v", bsl.Name, err),
			Completion: time.Now(), StoredNothing: true}
	} else {
		outcome = r.Engine.Run(ctx, b, store, func(p v1.BackupProgress) {
			// Progress is best effort: a lost update is corrected by the next.
			if err := r.patchStatus(ctx, b, func(s *v1.BackupStatus) { s.Progress = &p }); err != nil {
				log.Warn("recording backup progress", "error", err)
			}
		})
	}
	if outcome.DigestsSHA256 != "" {
		// Kept in the cluster, outside the bucket, before the phase says
		// the backup is done: whoever sees it Completed sees this too.
		if err := recordDigests(ctx, r.Client, b, outcome.DigestsSHA256); err != nil {
			log.Warn("recording the digest of the backup's digests file; verification will not be able to tell a rewritten digests file", "error", err)
		}
	}
	// Counted as the run ends, whether or not the status write below
	// succeeds: the store already says how it ended.
	metrics.BackupRan(schedule, metrics.BackupRun{
		Phase: outcome.Phase, Processed: !outcome.StoredNothing, Took: outcome.Completion.Sub(now.Time),
		TarballBytes: outcome.TarballBytes, Items: outcome.Progress.TotalItems, Errors: outcome.Errors, Warnings: outcome.Warnings,
		SnapshotsAttempted: outcome.VolumeSnapshotsAttempted, SnapshotsCompleted: outcome.VolumeSnapshotsCompleted,
		BackupName: b.Name, CSISnapshotsAttempted: outcome.CSIVolumeSnapshotsAttempted, CSISnapshotsCompleted: outcome.CSIVolumeSnapshotsCompleted,
	})
	return r.patchStatus(ctx, b, func(s *v1.BackupStatus) {
		tmp := v1.Backup{Status: *s}
		backup.ApplyOutcome(&tmp, outcome)
		*s = tmp.Status
	})
}

func (r *BackupReconciler) failValidation(ctx context.Context, b *v1.Backup, msgs []string) error {
	r.Log.Info("backup failed validation", "backup", b.Namespace+"/"+b.Name, "errors", strings.Join(msgs, "; "))
	err := r.patchStatus(ctx, b, func(s *v1.BackupStatus) {
		s.Phase = v1.BackupPhaseFailedValidation
		s.ValidationErrors = msgs
		now := metav1.Now()
		s.CompletionTimestamp = &now
		// It expires like any backup (Velero's too), so garbage
		// collection removes it instead of keeping it forever.
		if s.Expiration == nil {
			ttl := b.Spec.TTL.Duration
			if ttl <= 0 {
				ttl = r.DefaultTTL
			}
			expiration := metav1.NewTime(now.Add(ttl))
			s.Expiration = &expiration
		}
	})
	if err == nil {
		// Once: a failed write is retried by validating again.
		metrics.BackupValidationFailed(b.Labels[v1.ScheduleNameLabel])
	}
	return err
}

// patchStatus applies change to b's status and writes it (writeStatus),
// conditions included, and records the new phase as an Event.
func (r *BackupReconciler) patchStatus(ctx context.Context, b *v1.Backup, change func(*v1.BackupStatus)) error {
	before := string(b.Status.Phase)
	err := writeStatus(ctx, r.Client, r.APIReader, b, func() {
		change(&b.Status)
		setBackupConditions(b)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status of backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	recordPhaseChange(r.Events, b, before)
	return nil
}

// reader reads around the cache, each call bounded by cluster.CallTimeout.
func (r *BackupReconciler) reader() client.Reader { return cluster.TimedReader{Reader: r.APIReader} }

// recordDigests puts the sha256 of b's digests file on b, where someone
// who can rewrite the bucket cannot rewrite it too.
func recordDigests(ctx context.Context, c client.Client, b *v1.Backup, sum string) error {
	if b.Annotations[v1.DigestsAnnotation] == sum {
		return nil
	}
	return patchObject(ctx, c, b, func() {
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[v1.DigestsAnnotation] = sum
	})
}
