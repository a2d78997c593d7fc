package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
)

const (
	// apiTimeout bounds every single API call, so a hung API server turns
	// into an error instead of a CLI that never returns.
	apiTimeout = 30 * time.Second

	// A CLI run is short and bursty (install applies a dozen objects, --wait
	// polls); client-go's defaults of 5/10 would throttle it for no benefit.
	clientQPS   = 50
	clientBurst = 100
)

// Factory turns the global flags into clients. Every command gets its
// clients from here, so tests replace the client constructor and keep the
// rest of the command unchanged.
type Factory struct {
	Kubeconfig string
	Context    string
	Namespace  string
	// CACertFile is the default of --cacert, from Velero's client config.
	CACertFile string

	// NewClient, when set, replaces the client built from the kubeconfig.
	NewClient func() (client.Client, error)
	// HTTPClient fetches http(s) download URLs.
	HTTPClient *http.Client
	// Now and Location make time-dependent output reproducible in tests.
	Now      func() time.Time
	Location *time.Location
	// PollInterval is how often --wait and download requests re-read an object.
	PollInterval time.Duration
	// IsTerminal decides whether progress is drawn on one updating line.
	IsTerminal func(io.Writer) bool
	// IsTerminalInput decides whether a question can be asked on the input;
	// nil means: is it a terminal.
	IsTerminalInput func(io.Reader) bool

	restConfig *rest.Config
	client     client.Client
}

// NewFactory returns a factory with the real clients and clock. The
// namespace and the CA bundle default the way Velero's client defaults
// them, so a Velero user's settings carry over: VELERO_NAMESPACE, then
// Velero's client config file (`velero client config set namespace=...`),
// then "velero"; -n overrides them all.
func NewFactory() *Factory {
	f := &Factory{
		Namespace:    cmp.Or(os.Getenv("VELERO_NAMESPACE"), v1.DefaultNamespace),
		HTTPClient:   newHTTPClient(),
		Now:          time.Now,
		Location:     time.Local,
		PollInterval: time.Second,
		IsTerminal:   isTerminal,
	}
	cfg, err := loadVeleroConfig(veleroConfigPath())
	if err != nil {
		// As in Velero: a broken config file is reported, not fatal.
		fmt.Fprintf(os.Stderr, "Warning: %v\n", err)
	}
	if ns := cfg.Namespace; ns != "" {
		f.Namespace = ns
	}
	f.CACertFile = cfg.CACert
	return f
}

// veleroConfig is the part of Velero's client config file Lifeboat uses:
// its keys "namespace" and "cacert". Velero stores every value as a string.
type veleroConfig struct {
	Namespace string
	CACert    string
}

// veleroConfigPath is where `velero client config set` writes.
func veleroConfigPath() string {
	return filepath.Join(os.Getenv("HOME"), ".config", "velero", "config.json")
}

// loadVeleroConfig reads Velero's client config; a missing file is an
// empty config.
func loadVeleroConfig(path string) (veleroConfig, error) {
	var cfg veleroConfig
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("reading the Velero client config: %w", err)
	}
	// Decoded loosely: a value of another type (Velero ignores those too)
	// must not hide the others.
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return cfg, fmt.Errorf("reading the Velero client config %s: %w", path, err)
	}
	cfg.Namespace, _ = raw["namespace"].(string)
	cfg.CACert, _ = raw["cacert"].(string)
	return cfg, nil
}

// newHTTPClient bounds the wait for a store to answer but not the transfer:
// a tarball of many gigabytes may take longer than any fixed limit, and
// Ctrl-C cancels the request's context anyway.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// NewScheme holds every kind the CLI reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		v1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the client scheme: %w", err)
		}
	}
	return scheme, nil
}

// RESTConfig loads the kubeconfig the way kubectl does: --kubeconfig, then
// KUBECONFIG, then ~/.kube/config, then the in-cluster service account.
func (f *Factory) RESTConfig() (*rest.Config, error) {
	if f.restConfig != nil {
		return f.restConfig, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("no Kubernetes cluster configured: %w\n%s", err, pointAtClusterHint)
		}
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = clientQPS
	cfg.Burst = clientBurst
	cfg.UserAgent = "lifeboat/" + buildinfo.Version
	f.restConfig = cfg
	return cfg, nil
}

// Client returns an uncached client: CLI verbs read a handful of objects
// once, and a cache would start watches for each kind it touches.
func (f *Factory) Client() (client.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	if f.NewClient != nil {
		c, err := f.NewClient()
		if err != nil {
			return nil, err
		}
		f.client = c
		return c, nil
	}
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, f.explain(fmt.Errorf("creating Kubernetes client: %w", err))
	}
	f.client = c
	return c, nil
}

// serverURL names the API server in error messages; empty when unknown.
func (f *Factory) serverURL() string {
	if f.restConfig == nil {
		return ""
	}
	return f.restConfig.Host
}

// callCtx bounds one API call.
func callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, apiTimeout)
}

func (f *Factory) now() time.Time {
	if f.Now == nil {
		return time.Now()
	}
	return f.Now()
}

func (f *Factory) location() *time.Location {
	if f.Location == nil {
		return time.Local
	}
	return f.Location
}

func (f *Factory) pollInterval() time.Duration {
	if f.PollInterval <= 0 {
		return time.Second
	}
	return f.PollInterval
}

func (f *Factory) isTerminal(w io.Writer) bool {
	if f.IsTerminal == nil {
		return isTerminal(w)
	}
	return f.IsTerminal(w)
}

func (f *Factory) httpClient() *http.Client {
	if f.HTTPClient == nil {
		return http.DefaultClient
	}
	return f.HTTPClient
}
