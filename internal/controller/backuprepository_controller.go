package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// BackupRepositories prepares and maintains the kopia repositories of
// file-system backups (repository.Manager).
type BackupRepositories interface {
	// Prepare creates the repository if its storage holds none and
	// checks it opens with the password.
	Prepare(ctx context.Context, r podvolume.Repository) error
	// RunMaintenance runs the maintenance the repository's own schedule
	// says is due.
	RunMaintenance(ctx context.Context, r podvolume.Repository) error
}

// BackupRepository phases and maintenance results, as Velero writes them.
const (
	repoPhaseNew         v1.BackupRepositoryPhase             = "New"
	repoPhaseReady       v1.BackupRepositoryPhase             = "Ready"
	repoPhaseNotReady    v1.BackupRepositoryPhase             = "NotReady"
	maintenanceSucceeded v1.BackupRepositoryMaintenanceResult = "Succeeded"
	maintenanceFailed    v1.BackupRepositoryMaintenanceResult = "Failed"
	// recentMaintenanceKept is how many runs status.recentMaintenance keeps.
	recentMaintenanceKept = 3
)

// BackupRepositoryReconciler sets BackupRepositories up (creating the
// kopia repository, or connecting to the one already in the location) and
// runs their maintenance every spec.maintenanceFrequency, as Velero's
// repository controller does. Velero runs maintenance as a Job per run;
// Lifeboat runs it in the server process, one repository at a time per
// worker, in the same kopia code.
type BackupRepositoryReconciler struct {
	Client       client.Client
	Repositories BackupRepositories
	// EnsurePassword creates the repositories' password Secret with
	// Velero's default when it is missing.
	EnsurePassword func(ctx context.Context) error
	// DefaultFrequency is the maintenance frequency given to repositories
	// that set none (Velero: one hour for kopia).
	DefaultFrequency time.Duration
	Log              *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler.
func (r *BackupRepositoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1.BackupRepository{}).Named("backuprepository").
		// Maintenance of one repository must not hold up setting up
		// another, which a backup is waiting for.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

func (r *BackupRepositoryReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var br v1.BackupRepository
	if err := r.Client.Get(ctx, req.NamespacedName, &br); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := r.Log.With("backupRepository", req.String())
	if br.Spec.MaintenanceFrequency.Duration <= 0 {
		if err := r.patch(ctx, &br, func(b *v1.BackupRepository) {
			b.Spec.MaintenanceFrequency = metav1.Duration{Duration: r.DefaultFrequency}
		}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if br.Spec.RepositoryType != "kopia" {
		return ctrl.Result{}, r.setPhase(ctx, &br, repoPhaseNotReady,
			fmt.Sprintf("repository type %q is not supported: Lifeboat keeps file-system backups in kopia repositories only", br.Spec.RepositoryType))
	}
	var bsl v1.BackupStorageLocation
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: br.Spec.BackupStorageLocation}, &bsl)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.setPhase(ctx, &br, repoPhaseNotReady,
			fmt.Sprintf("BackupStorageLocation %q does not exist in namespace %q", br.Spec.BackupStorageLocation, br.Namespace))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	repo := podvolume.Repository{Location: &bsl, VolumeNamespace: br.Spec.VolumeNamespace}

	switch br.Status.Phase {
	case "", repoPhaseNew, repoPhaseNotReady:
		wasNew := br.Status.Phase != repoPhaseNotReady
		if r.EnsurePassword != nil {
			if err := r.EnsurePassword(ctx); err != nil {
				return ctrl.Result{}, r.setPhase(ctx, &br, repoPhaseNotReady, err.Error())
			}
		}
		if err := r.Repositories.Prepare(ctx, repo); err != nil {
			log.Warn("backup repository not ready", "error", err)
			if perr := r.setPhase(ctx, &br, repoPhaseNotReady, err.Error()); perr != nil {
				return ctrl.Result{}, perr
			}
			// Velero checks a NotReady repository again on its next
			// event; a periodic retry also lets a fixed Secret or store
			// be noticed.
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
		now := metav1.NewTime(r.now())
		if err := r.patch(ctx, &br, func(b *v1.BackupRepository) {
			b.Status.Phase = repoPhaseReady
			b.Status.Message = ""
			// As Velero: a repository just created needs no maintenance.
			if wasNew && b.Status.LastMaintenanceTime == nil {
				b.Status.LastMaintenanceTime = &now
			}
		}); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("backup repository ready", "volumeNamespace", br.Spec.VolumeNamespace, "location", bsl.Name)
	}
	if bsl.Spec.AccessMode == "ReadOnly" {
		return ctrl.Result{}, nil
	}
	return r.maintainIfDue(ctx, &br, repo, log)
}

func (r *BackupRepositoryReconciler) maintainIfDue(ctx context.Context, br *v1.BackupRepository, repo podvolume.Repository, log *slog.Logger) (ctrl.Result, error) {
	freq := br.Spec.MaintenanceFrequency.Duration
	if last := br.Status.LastMaintenanceTime; last != nil {
		if wait := last.Add(freq).Sub(r.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	start := metav1.NewTime(r.now())
	log.Info("running repository maintenance")
	err := r.Repositories.RunMaintenance(ctx, repo)
	end := metav1.NewTime(r.now())
	run := v1.BackupRepositoryMaintenanceStatus{Result: maintenanceSucceeded, StartTimestamp: &start, CompleteTimestamp: &end}
	if err != nil {
		log.Warn("repository maintenance failed", "error", err)
		run.Result, run.Message = maintenanceFailed, err.Error()
	}
	if perr := r.patch(ctx, br, func(b *v1.BackupRepository) {
		if err == nil {
			b.Status.LastMaintenanceTime = &end
		}
		b.Status.RecentMaintenance = append(b.Status.RecentMaintenance, run)
		if n := len(b.Status.RecentMaintenance); n > recentMaintenanceKept {
			b.Status.RecentMaintenance = b.Status.RecentMaintenance[n-recentMaintenanceKept:]
		}
	}); perr != nil {
		return ctrl.Result{}, perr
	}
	// A failed run is tried again at the next period, as Velero does.
	return ctrl.Result{RequeueAfter: freq}, nil
}

func (r *BackupRepositoryReconciler) setPhase(ctx context.Context, br *v1.BackupRepository, phase v1.BackupRepositoryPhase, msg string) error {
	if br.Status.Phase == phase && br.Status.Message == msg {
		return nil
	}
	return r.patch(ctx, br, func(b *v1.BackupRepository) {
		b.Status.Phase = phase
		b.Status.Message = msg
	})
}

// patch merges the change into the object (BackupRepository has no status
// subresource, in Velero's CRD as here).
func (r *BackupRepositoryReconciler) patch(ctx context.Context, br *v1.BackupRepository, change func(*v1.BackupRepository)) error {
	orig := br.DeepCopy()
	change(br)
	cctx, cancel := context.WithTimeout(ctx, statusWriteTimeout)
	defer cancel()
	if err := r.Client.Patch(cctx, br, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patching BackupRepository %s/%s: %w", br.Namespace, br.Name, err)
	}
	return nil
}
