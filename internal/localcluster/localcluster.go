// Package localcluster runs a real kube-apiserver with etcd on this machine,
// for the tests and benchmarks that need no pod (internal/localnode runs
// pods, for `make cluster` and the demo). The binaries are built once by
// hack/cluster-bins.sh; controller-runtime's envtest starts them and creates
// an admin user. No controllers run, so namespaces never finish terminating:
// users of this package should create unique namespaces.
package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lifeboat-io/lifeboat/config/crd"
)

// AssetsEnv names the directory holding the kube-apiserver and etcd binaries.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Options configure a local cluster.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd; empty means $KUBEBUILDER_ASSETS.
	AssetsDir string
	// InstallCRDs installs Lifeboat's velero.io CRDs once the server is up.
	InstallCRDs bool
	// RBAC runs kube-apiserver with --authorization-mode=RBAC, so that
	// users other than the admin (who is in system:masters, which RBAC
	// always allows) get only what roles grant them: tests of the server's
	// RBAC impersonate its service account. It is envtest's default today;
	// set here, a test that relies on refusals cannot pass on AlwaysAllow
	// should that default change.
	RBAC bool
	// StartTimeout bounds the start of each component; a cold etcd on a busy
	// 2-core machine can take a while, so the default is generous.
	StartTimeout time.Duration
}

// Cluster is a running local API server.
type Cluster struct {
	Config  *rest.Config
	env     *envtest.Environment
	wrapDir string
}

// Start starts etcd and kube-apiserver and waits until they serve.
func Start(opts Options) (*Cluster, error) {
	assets := opts.AssetsDir
	if assets == "" {
		assets = os.Getenv(AssetsEnv)
	}
	if assets == "" {
		return nil, fmt.Errorf("no kube-apiserver binaries: set %s to the directory printed by hack/cluster-bins.sh (make does this)", AssetsEnv)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 180 * time.Second
	}
	wrapDir, err := os.MkdirTemp("", "lifeboat-cluster-bin-")
	if err != nil {
		return nil, fmt.Errorf("creating wrapper dir: %w", err)
	}
	apiserver, err := deathWrapper(wrapDir, filepath.Join(assets, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	etcd, err := deathWrapper(wrapDir, filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.GetAPIServer().Path = apiserver
	if opts.RBAC {
		env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	if opts.InstallCRDs {
		crds, err := crd.All()
		if err != nil {
			return nil, err
		}
		env.CRDInstallOptions.CRDs = crds
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(wrapDir)
		return nil, fmt.Errorf("starting local kube-apiserver (binaries in %s): %w", assets, err)
	}
	// The default client-side rate limit (5 qps) would make the API server
	// look ten times slower than it is in tests and benchmarks.
	cfg.QPS, cfg.Burst = 1000, 2000
	return &Cluster{Config: cfg, env: env, wrapDir: wrapDir}, nil
}

// Stop stops the API server and etcd and removes their data.
func (c *Cluster) Stop() error {
	err := c.env.Stop()
	return errors.Join(err, os.RemoveAll(c.wrapDir))
}

// WriteKubeconfig writes an admin kubeconfig for the cluster to path.
func (c *Cluster) WriteKubeconfig(path string) error {
	return WriteKubeconfig(c.Config, path)
}

// WriteKubeconfig writes a kubeconfig that authenticates like cfg.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lifeboat-local"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		// A config that impersonates (a service account, in the tests)
		// gives a kubeconfig that does too.
		Impersonate:       cfg.Impersonate.UserName,
		ImpersonateGroups: cfg.Impersonate.Groups,
	}
	kc.Contexts["lifeboat-local"] = &clientcmdapi.Context{Cluster: "lifeboat-local", AuthInfo: "admin"}
	kc.CurrentContext = "lifeboat-local"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating kubeconfig dir: %w", err)
	}
	return clientcmd.WriteToFile(*kc, path)
}

// deathWrapper writes a script that runs bin with SIGKILL as its parent-death
// signal. envtest starts its processes in their own process group and stops
// them on Stop, but a test binary killed by a timeout or SIGKILL never gets
// to call Stop; without this, etcd and kube-apiserver would outlive it.
func deathWrapper(dir, bin string) (string, error) {
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("local cluster binary missing (run hack/cluster-bins.sh): %w", err)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", fmt.Errorf("setpriv (util-linux) is needed to tie the local cluster to its parent: %w", err)
	}
	path := filepath.Join(dir, filepath.Base(bin))
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, bin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("writing wrapper for %s: %w", bin, err)
	}
	return path, nil
}
