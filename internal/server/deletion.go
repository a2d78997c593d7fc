package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/controller"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/selection"
)

// newDeletionReconciler builds the DeleteBackupRequest controller and its
// engine.
func newDeletionReconciler(mgr ctrl.Manager, acc *cluster.Access, opts Options, plugins *pluginhost.Host,
	resolver *locations.Resolver, forgetter podvolume.Forgetter, rec events.EventRecorder, log *slog.Logger) *controller.DeleteBackupRequestReconciler {
	apiCluster := &deletion.APICluster{Access: acc, Namespace: opts.Namespace, Locations: resolver}
	engine := &deletion.Engine{
		Plugins:    plugins,
		Cluster:    apiCluster,
		PodVolumes: apiCluster,
		Forgetter:  forgetter,
		Resolver:   discoveryResolver(acc.Discovery),
		Workers:    opts.DeleteItemActionWorkers,
		Limits:     opts.ArchiveLimits,
		Log:        log.With("component", "deletion"),
	}
	return &controller.DeleteBackupRequestReconciler{
		Client: mgr.GetClient(), APIReader: acc.Reader, Locations: resolver, Engine: engine,
		MaxAttempts: opts.DeletionMaxAttempts, RetryBase: opts.DeletionRetryBase,
		Log: log.With("controller", "deletebackuprequest"), Events: rec,
	}
}

// discoveryResolver resolves AppliesTo names against the resources the
// cluster serves now, at their preferred versions, as Velero does. A group
// whose discovery failed (an aggregated API that is down) leaves its names
// unresolved, which Velero's rules then match as written.
func discoveryResolver(dc discovery.DiscoveryInterface) deletion.ResolverFunc {
	return func(context.Context) (selection.ResourceResolver, error) {
		lists, err := dc.ServerPreferredResources()
		var partial *discovery.ErrGroupDiscoveryFailed
		if err != nil && !errors.As(err, &partial) {
			return nil, fmt.Errorf("discovering the server's resources: %w", err)
		}
		return selection.NewDiscoveryResolver(lists), nil
	}
}
