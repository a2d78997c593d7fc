// Package cluster is the server's one way into the cluster it protects. The
// server builds one Access at start; the backup, restore and deletion
// engines, the built-in delete actions and the reconcilers take it and build
// no client of their own, so every call shares the server's rate limits,
// its scheme and its timeouts.
package cluster

import (
	"context"
	"fmt"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// CallTimeout bounds one call to the API server that is not a page of a
// backup's LIST or a watch: a call that hangs must not hold a worker (and
// the objects it serves) forever.
const CallTimeout = 30 * time.Second

// Access holds the clients. Its fields are safe for concurrent use.
type Access struct {
	// Config is the server's config (its QPS and burst), with the API
	// server's deprecation warnings off: listing deprecated APIs is what a
	// backup must do, and the warnings would only be noise in the log.
	Config *rest.Config
	// Typed reaches the built-in kinds; Typed.CoreV1().RESTClient() pages
	// any resource by path, which is how the backup lists.
	Typed kubernetes.Interface
	// Dynamic reaches any resource.
	Dynamic dynamic.Interface
	// Discovery is uncached, so a new run sees CRDs installed since the
	// last. Its calls take no context; each request is bounded by
	// CallTimeout instead.
	Discovery discovery.DiscoveryInterface
	// Mapper resolves resources to kinds and scopes from a cached
	// discovery; Reset it when a kind is not found, so CRDs installed
	// after the server started are seen.
	Mapper meta.ResettableRESTMapper
	// Client reads and writes around any cache: the server's cache holds
	// only its own namespace's velero.io kinds, and what the engines read
	// (claims, pods, policies anywhere in the cluster) must never start an
	// informer over the whole cluster.
	Client client.Client
	// Reader is Client with each Get and List bounded by CallTimeout.
	Reader client.Reader
	// Scheme knows the built-in kinds, velero.io/v1 and the CSI snapshot kinds.
	Scheme *runtime.Scheme
}

// NewScheme returns a scheme with the built-in kinds, velero.io/v1 and
// snapshot.storage.k8s.io/v1.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the client scheme: %w", err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the client scheme: %w", err)
	}
	// CSI snapshots: the backup creates VolumeSnapshots and reads their
	// contents and classes through the typed client.
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the client scheme: %w", err)
	}
	return scheme, nil
}

// New builds the clients over cfg.
func New(cfg *rest.Config) (*Access, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = CallTimeout
	disc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the controller-runtime client: %w", err)
	}
	return &Access{
		Config:    cfg,
		Typed:     typed,
		Dynamic:   dyn,
		Discovery: disc,
		Mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		Client:    c,
		Reader:    TimedReader{Reader: c},
		Scheme:    scheme,
	}, nil
}

// Call runs fn with a context bounded by CallTimeout: the way to make one
// write (or a read that is not through Reader).
func Call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return fn(ctx)
}

// TimedReader bounds every Get and List of the Reader it wraps by
// Timeout (CallTimeout when zero).
type TimedReader struct {
	client.Reader
	Timeout time.Duration
}

func (t TimedReader) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return CallTimeout
}

// Get implements client.Reader.
func (t TimedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()
	return t.Reader.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (t TimedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()
	return t.Reader.List(ctx, list, opts...)
}
