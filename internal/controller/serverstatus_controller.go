package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// ServerStatusReconciler answers ServerStatusRequests (what `velero version`
// uses to find the server's version) and deletes answered requests after
// TTL, as Velero does.
type ServerStatusReconciler struct {
	Client client.Client
	// Version is what requests are answered with (buildinfo.ServerVersion).
	Version string
	Plugins []v1.PluginInfo
	TTL     time.Duration
}

// SetupWithManager registers the reconciler.
func (r *ServerStatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1.ServerStatusRequest{}).Named("serverstatusrequest").Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *ServerStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ssr v1.ServerStatusRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &ssr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ssr.Status.Phase == v1.ServerStatusRequestPhaseProcessed {
		if ssr.Status.ProcessedTimestamp != nil {
			if wait := time.Until(ssr.Status.ProcessedTimestamp.Add(r.TTL)); wait > 0 {
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &ssr))
	}
	now := metav1.Now()
	err := writeStatus(ctx, r.Client, nil, &ssr, func() {
		ssr.Status.Phase = v1.ServerStatusRequestPhaseProcessed
		ssr.Status.ProcessedTimestamp = &now
		ssr.Status.ServerVersion = r.Version
		ssr.Status.Plugins = r.Plugins
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of server status request %s: %w", req, err)
	}
	return ctrl.Result{RequeueAfter: r.TTL}, nil
}
