package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// VeleroVersion is the Velero release whose API, storage layout and plugin
// protocol Lifeboat speaks.
const VeleroVersion = "v1.18.3"

// ServerVersion is the version a ServerStatusRequest reports:
// VeleroVersion with Lifeboat's own version as semantic-version build
// metadata, e.g. v1.18.3+lifeboat.v0.4.0. Velero's CLI compares the
// major.minor of its own version with the server's and, when they differ,
// tells the user to upgrade one of them; reporting Lifeboat's version alone
// would make every `velero version` say "Please update server". Build
// metadata holds only [0-9A-Za-z-] in dot-separated, non-empty parts, so
// anything else in Lifeboat's version becomes "-".
func ServerVersion(lifeboat string) string {
	meta := badMetadata.ReplaceAllString(lifeboat, "-")
	var parts []string
	for p := range strings.SplitSeq(meta, ".") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = []string{"unknown"}
	}
	return VeleroVersion + "+lifeboat." + strings.Join(parts, ".")
}

var badMetadata = regexp.MustCompile(`[^0-9A-Za-z.-]`)

// ServerStatusReconciler answers ServerStatusRequests (what `velero version`
// uses to find the server's version) and deletes answered requests after
// TTL, as Velero does.
type ServerStatusReconciler struct {
	Client client.Client
	// Version is what requests are answered with (ServerVersion).
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
