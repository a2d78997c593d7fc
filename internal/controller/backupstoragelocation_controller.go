package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
)

// BackupStorageLocationReconciler checks that each BackupStorageLocation's
// store can be reached and holds a valid layout, and marks it Available or
// Unavailable with the reason.
type BackupStorageLocationReconciler struct {
	Client    client.Client
	Locations *locations.Resolver
	// DefaultFrequency applies to locations without spec.validationFrequency.
	DefaultFrequency time.Duration
	Log              *slog.Logger
	// Checks, when set, records each location checked (the server's
	// readiness).
	Checks *LocationChecks
}

// SetupWithManager registers the reconciler.
func (r *BackupStorageLocationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.BackupStorageLocation{}, builder.WithPredicates(specChanged)).
		Named("backupstoragelocation").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupStorageLocationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var bsl v1.BackupStorageLocation
	if err := r.Client.Get(ctx, req.NamespacedName, &bsl); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.BackupLocationRemoved(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	every := r.DefaultFrequency
	if f := bsl.Spec.ValidationFrequency; f != nil {
		every = f.Duration
	}

	vctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := r.validate(vctx, &bsl)
	metrics.BackupLocationChecked(bsl.Name, err == nil)

	before := bsl.Status.Phase
	now := metav1.Now()
	// A conflict (the location edited while it was checked) is refused:
	// the check ran against what was read.
	werr := writeStatus(ctx, r.Client, nil, &bsl, func() {
		bsl.Status.LastValidationTime = &now
		if err != nil {
			bsl.Status.Phase = v1.BackupStorageLocationPhaseUnavailable
			bsl.Status.Message = err.Error()
			setCondition(&bsl.Status.Conditions, bsl.Generation, ConditionAvailable, false, "ValidationFailed", err.Error())
		} else {
			bsl.Status.Phase = v1.BackupStorageLocationPhaseAvailable
			bsl.Status.Message = ""
			setCondition(&bsl.Status.Conditions, bsl.Generation, ConditionAvailable, true, "Validated", "the object store is reachable and its layout is valid")
		}
	})
	if werr == nil && before != bsl.Status.Phase {
		r.Log.Info("storage location changed phase", "location", req.String(), "phase", bsl.Status.Phase, "message", bsl.Status.Message)
	}
	if werr != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of storage location %s: %w", req, werr)
	}
	r.Checks.Record(req.NamespacedName)
	if every <= 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: every}, nil
}

func (r *BackupStorageLocationReconciler) validate(ctx context.Context, bsl *v1.BackupStorageLocation) error {
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return err
	}
	return store.IsValid(ctx)
}
