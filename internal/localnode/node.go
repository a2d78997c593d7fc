// Package localnode runs a real single-node Kubernetes cluster on this
// machine: etcd and kube-apiserver as in internal/localcluster, plus
// kube-controller-manager, kube-scheduler, containerd, the kubelet and
// kube-proxy, so pods really run (logs, exec, volumes, Services, the
// in-cluster server). Tests that need no pod use internal/localcluster,
// which starts in a second; this one takes ten.
//
// It needs root and changes the machine (a bridge, iptables chains,
// cgroups, mounts, sysctls); Stop undoes all of it, and a node whose
// process died before Stop is undone by the next Start. One node runs per
// machine at a time: Start waits for the one running to stop.
//
// The binaries come from hack/cluster-bins.sh (etcd, kube-apiserver) and
// hack/node-bins.sh (the rest), the runtime from hack/node-packages.sh
// (Debian's containerd, runc, CNI plugins, iptables). Nothing can be
// pulled: images are imported from tarballs (ImportImage) and pods use
// imagePullPolicy Never.
package localnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// Environment variables naming the binary directories (the Makefile sets
// them from the two scripts).
const (
	KubeBinsEnv = "KUBEBUILDER_ASSETS"
	NodeBinsEnv = "LIFEBOAT_NODE_BINS"
	// TestImagesEnv names the directory of the image archives `make image`
	// writes, for tests that run pods.
	TestImagesEnv = "LIFEBOAT_IMAGES"
)

// Options configure a node.
type Options struct {
	// KubeBins holds etcd and kube-apiserver; empty: $KUBEBUILDER_ASSETS.
	KubeBins string
	// NodeBins holds kubelet, kube-controller-manager, kube-scheduler,
	// kube-proxy and kubectl; empty: $LIFEBOAT_NODE_BINS.
	NodeBins string
	// SandboxImage is the pod sandbox ("pause") image; it must be among
	// Images.
	SandboxImage string
	// Images are image tarballs imported before the kubelet starts.
	Images []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// StartTimeout bounds each wait of the start (default 3 minutes).
	StartTimeout time.Duration
	// CSI also runs the CSI test stack (internal/testutil/csistack) with
	// its driver registered with this node's kubelet: claims of storage
	// class csistack.StorageClass are provisioned, mounted into pods and
	// snapshotted. Its sidecars come from $LIFEBOAT_CSI_BINS
	// (hack/csi-bins.sh).
	CSI bool
}

// Node is a running single-node cluster.
type Node struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Name and IP are the node's; the API server listens on IP.
	Name, IP string

	// CSI is the CSI stack (Options.CSI), nil without it.
	CSI *csistack.Stack

	opts  Options
	dirs  dirs
	procs []*proc
	state state
	lock  *os.File

	kubeletCerts kubeletCerts
}

// dirs are the node's own directories, all under one root.
type dirs struct {
	root, pki, etcd, logs                             string
	containerdRoot, containerdState, containerdSocket string
	cniConf, cniData, kubeletRoot, podLogs            string
}

func newDirs(root string) dirs {
	return dirs{
		root: root, pki: filepath.Join(root, "pki"), etcd: filepath.Join(root, "etcd"), logs: filepath.Join(root, "logs"),
		containerdRoot:   filepath.Join(root, "containerd", "root"),
		containerdState:  filepath.Join(root, "containerd", "state"),
		containerdSocket: filepath.Join(root, "containerd", "containerd.sock"),
		cniConf:          filepath.Join(root, "cni", "net.d"),
		cniData:          filepath.Join(root, "cni", "ipam"),
		kubeletRoot:      filepath.Join(root, "kubelet"),
		podLogs:          filepath.Join(root, "pod-logs"),
	}
}

// Start starts the node and waits until it is Ready and the default
// ServiceAccount exists (a pod can be created).
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real local node needs root (it runs the kubelet and containerd)")
	}
	opts.KubeBins = firstNonEmpty(opts.KubeBins, os.Getenv(KubeBinsEnv))
	opts.NodeBins = firstNonEmpty(opts.NodeBins, os.Getenv(NodeBinsEnv))
	if opts.KubeBins == "" || opts.NodeBins == "" {
		return nil, fmt.Errorf("set %s (hack/cluster-bins.sh) and %s (hack/node-bins.sh)", KubeBinsEnv, NodeBinsEnv)
	}
	if opts.SandboxImage == "" {
		return nil, errors.New("localnode: Options.SandboxImage is required (the pause image, imported from Options.Images)")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	n = &Node{opts: opts}
	if err := n.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
			n = nil
		}
	}()
	if n.IP, err = hostIP(); err != nil {
		return n, err
	}
	if n.Name, err = os.Hostname(); err != nil {
		return n, err
	}
	root, err := os.MkdirTemp("", "lifeboat-node-")
	if err != nil {
		return n, err
	}
	n.dirs = newDirs(root)
	n.state = snapshotState(root)
	if err := os.MkdirAll(n.dirs.logs, 0o700); err != nil {
		return n, err
	}
	if err := n.saveState(); err != nil {
		return n, err
	}
	n.logf("starting a real node %s (%s) in %s", n.Name, n.IP, root)
	if err := n.startControlPlane(); err != nil {
		return n, err
	}
	if err := n.startRuntime(); err != nil {
		return n, err
	}
	for _, img := range opts.Images {
		if err := n.ImportImage(ctx, img); err != nil {
			return n, err
		}
	}
	if err := n.startKubelet(); err != nil {
		return n, err
	}
	if err := n.waitReady(ctx); err != nil {
		return n, err
	}
	if opts.CSI {
		// The state lives under the node's root, so the teardown of a
		// node whose test was killed removes it too.
		if n.CSI, err = csistack.Start(ctx, csistack.Options{
			Kubeconfig: n.Kubeconfig,
			StateDir:   filepath.Join(root, "csi"),
			Node:       true,
			NodeName:   n.Name,
			KubeletDir: n.dirs.kubeletRoot,
			Log:        opts.Log,
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// acquire takes the machine's node lock, waiting for a running node to
// stop, and removes what a dead one left.
func (n *Node) acquire(ctx context.Context) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return fmt.Errorf("waiting for the node another process runs on this machine to stop: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
	n.lock = f
	return recoverLeftovers(n.logf)
}

func (n *Node) startControlPlane() error {
	p, err := newPKI(n.dirs.pki)
	if err != nil {
		return err
	}
	ca := p.caFile()
	apiHosts := []string{"127.0.0.1", n.IP, apiServiceIP, "localhost", n.Name,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + clusterDomain}
	type identity struct {
		name, cn string
		orgs     []string
		hosts    []string
	}
	ids := []identity{
		{"apiserver", "kube-apiserver", nil, apiHosts},
		{"admin", "lifeboat-admin", []string{"system:masters"}, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		{"kube-proxy", "system:kube-proxy", nil, nil},
		{"kubelet-client", "system:node:" + n.Name, []string{"system:nodes"}, nil},
		{"kubelet-serving", "system:node:" + n.Name, []string{"system:nodes"}, []string{n.IP, n.Name}},
	}
	certs := map[string]certificate{}
	for _, id := range ids {
		if certs[id.name], err = p.issue(id.name, id.cn, id.orgs, id.hosts...); err != nil {
			return err
		}
	}
	sa, err := p.serviceAccountKey()
	if err != nil {
		return err
	}
	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	etcdPeer, err := freePort()
	if err != nil {
		return err
	}
	apiPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := n.start("etcd", filepath.Join(n.opts.KubeBins, "etcd"),
		"--data-dir", n.dirs.etcd, "--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer), "--unsafe-no-fsync"); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(n.IP, strconv.Itoa(apiPort))
	if err := n.start("kube-apiserver", filepath.Join(n.opts.KubeBins, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", n.IP, "--advertise-address", n.IP, "--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(n.dirs.root, "apiserver-certs"),
		"--tls-cert-file", certs["apiserver"].cert, "--tls-private-key-file", certs["apiserver"].key,
		"--client-ca-file", ca,
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true",
		"--service-cluster-ip-range", serviceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc."+clusterDomain,
		"--service-account-key-file", sa.cert, "--service-account-signing-key-file", sa.key,
		"--kubelet-client-certificate", certs["apiserver-kubelet-client"].cert,
		"--kubelet-client-key", certs["apiserver-kubelet-client"].key,
		"--kubelet-certificate-authority", ca,
		// The API server cannot resolve the node's name on these machines.
		"--kubelet-preferred-address-types", "InternalIP,Hostname"); err != nil {
		return err
	}
	kubeconfigs := map[string]string{}
	for _, who := range []string{"admin", "controller-manager", "scheduler", "kube-proxy", "kubelet-client"} {
		kubeconfigs[who] = filepath.Join(n.dirs.root, "kubeconfig", who)
		if err := writeKubeconfig(kubeconfigs[who], server, ca, certs[who]); err != nil {
			return err
		}
	}
	n.Kubeconfig = kubeconfigs["admin"]
	if n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig); err != nil {
		return err
	}
	n.Config.QPS, n.Config.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	if err := n.waitFor("the API server", n.opts.StartTimeout, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, err
	}); err != nil {
		return err
	}
	// Without the controller manager there is no default ServiceAccount and
	// no kube-root-ca.crt, so no pod could start.
	if err := n.start("kube-controller-manager", filepath.Join(n.opts.NodeBins, "kube-controller-manager"),
		"--kubeconfig", kubeconfigs["controller-manager"],
		"--authentication-kubeconfig", kubeconfigs["controller-manager"],
		"--authorization-kubeconfig", kubeconfigs["controller-manager"],
		"--use-service-account-credentials", "--root-ca-file", ca,
		"--service-account-private-key-file", sa.key,
		"--cluster-signing-cert-file", ca, "--cluster-signing-key-file", filepath.Join(n.dirs.pki, "ca.key"),
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
		return err
	}
	if err := n.start("kube-scheduler", filepath.Join(n.opts.NodeBins, "kube-scheduler"),
		"--kubeconfig", kubeconfigs["scheduler"],
		"--authentication-kubeconfig", kubeconfigs["scheduler"],
		"--authorization-kubeconfig", kubeconfigs["scheduler"],
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
		return err
	}
	n.kubeletCerts = kubeletCerts{ca: ca, serving: certs["kubelet-serving"], kubeconfig: kubeconfigs["kubelet-client"], proxyKubeconfig: kubeconfigs["kube-proxy"]}
	return nil
}

func (n *Node) startRuntime() error {
	if err := writeFile(filepath.Join(n.dirs.root, "containerd.toml"), containerdConfig(n.dirs, n.opts.SandboxImage)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(n.dirs.cniConf, "10-lifeboat.conflist"), cniConfig(n.dirs)); err != nil {
		return err
	}
	if err := n.start("containerd", "/usr/bin/containerd", "--config", filepath.Join(n.dirs.root, "containerd.toml")); err != nil {
		return err
	}
	return n.waitFor("containerd", n.opts.StartTimeout, func() (bool, error) {
		err := exec.Command("ctr", "--address", n.dirs.containerdSocket, "version").Run()
		return err == nil, err
	})
}

// ImportImage imports an image tarball (OCI layout or docker archive) into
// the node's containerd, where the kubelet finds it.
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.dirs.containerdSocket, "-n", "k8s.io",
		"images", "import", "--no-unpack=false", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing image %s into the node: %w: %s", tarball, err, out)
	}
	n.logf("imported %s", tarball)
	return nil
}

func (n *Node) startKubelet() error {
	c := n.kubeletCerts
	if err := writeFile(filepath.Join(n.dirs.root, "kubelet.yaml"), kubeletConfig(n.dirs, c.ca, c.serving)); err != nil {
		return err
	}
	if err := n.start("kubelet", filepath.Join(n.opts.NodeBins, "kubelet"),
		"--config", filepath.Join(n.dirs.root, "kubelet.yaml"),
		"--kubeconfig", c.kubeconfig,
		"--root-dir", n.dirs.kubeletRoot,
		"--hostname-override", n.Name, "--node-ip", n.IP); err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	healthzPort, err := freePort()
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(n.dirs.root, "kube-proxy.yaml"), kubeProxyConfig(c.proxyKubeconfig, n.Name, metricsPort, healthzPort)); err != nil {
		return err
	}
	return n.start("kube-proxy", filepath.Join(n.opts.NodeBins, "kube-proxy"), "--config", filepath.Join(n.dirs.root, "kube-proxy.yaml"))
}

// waitReady waits for the node to be Ready and the default ServiceAccount
// to exist.
func (n *Node) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	get := func(fn func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return fn(ctx)
	}
	if err := n.waitFor("node "+n.Name+" to be Ready", n.opts.StartTimeout, func() (bool, error) {
		var node *corev1.Node
		err := get(func(ctx context.Context) (err error) {
			node, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("node not ready: %s", c.Message)
			}
		}
		return false, errors.New("node has no Ready condition yet")
	}); err != nil {
		return err
	}
	return n.waitFor("the default ServiceAccount", n.opts.StartTimeout, func() (bool, error) {
		err := get(func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return err == nil, err
	})
}

// Stop stops every component and undoes what the node did to the machine.
func (n *Node) Stop() error {
	if n == nil || n.lock == nil {
		return nil
	}
	var errs []error
	// The CSI stack first: it unmounts what its driver mounted for pods
	// still there, before the kubelet goes.
	if n.CSI != nil {
		n.CSI.Stop()
		n.CSI = nil
	}
	// Clients of the API server first, the runtime after the kubelet, etcd
	// last.
	order := []string{"kube-proxy", "kubelet", "kube-scheduler", "kube-controller-manager", "containerd", "kube-apiserver", "etcd"}
	for _, name := range order {
		for _, p := range n.procs {
			if p.name == name {
				errs = append(errs, p.stop(10*time.Second))
			}
		}
	}
	if n.dirs.root != "" {
		errs = append(errs, teardownMachine(n.state, n.logf))
	} else {
		errs = append(errs, removeIfExists(filepath.Join(stateDir, "state.json")))
	}
	_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
	errs = append(errs, n.lock.Close())
	n.lock = nil
	return errors.Join(errs...)
}

// KubeletDir is the kubelet's root directory (its plugins_registry, pods'
// volumes).
func (n *Node) KubeletDir() string { return n.dirs.kubeletRoot }

// LogDir is where each component's log is, for a failing test to point at.
func (n *Node) LogDir() string { return n.dirs.logs }

type kubeletCerts struct {
	ca                          string
	serving                     certificate
	kubeconfig, proxyKubeconfig string
}

func (n *Node) logf(format string, args ...any) {
	if n.opts.Log != nil {
		fmt.Fprintf(n.opts.Log, "localnode: "+format+"\n", args...)
	}
}

// hostIP is the IPv4 address of the interface of the default route: where
// the API server listens and pods reach it through the kubernetes Service.
func hostIP() (string, error) {
	conn, err := net.Dial("udp4", "203.0.113.1:9") // no packet is sent: a UDP "connect" only picks the route
	if err == nil {
		defer func() { _ = conn.Close() }()
		if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsLoopback() {
			return a.IP.String(), nil
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no IPv4 address on any interface but loopback; the node needs one for the API server and pods")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
