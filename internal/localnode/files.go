package localnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The node's address plan. The pod and service ranges are private ranges a
// test machine is unlikely to route; the bridge has a name of its own, so
// teardown removes exactly it.
const (
	podCIDR        = "10.244.0.0/24"
	serviceCIDR    = "10.96.0.0/16"
	apiServiceIP   = "10.96.0.1"
	bridgeName     = "lifeboat0"
	cniNetworkName = "lifeboat-pods"
	clusterDomain  = "cluster.local"
)

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig that authenticates with c.
func writeKubeconfig(path, server, caFile string, c certificate) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: c.cert, ClientKey: c.key}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// containerdConfig runs containerd in the node's own directories and socket,
// so it never meets a containerd the machine runs for something else.
// restrict_oom_score_adj: the sandbox lacks CAP_SYS_RESOURCE, and runc
// fails every container that asks for a negative OOM score without it.
func containerdConfig(d dirs, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, d.containerdRoot, d.containerdState, d.containerdSocket, d.containerdSocket+".ttrpc", sandboxImage, d.cniConf)
}

// cniConfig: one bridge with NAT to the outside (ipMasq) and hairpin, so a
// pod reaches a Service that lands on itself; host-local IPs kept in the
// node's own directory.
func cniConfig(d dirs) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, cniNetworkName, bridgeName, d.cniData, podCIDR)
}

// kubeletConfig. failCgroupV1=false: these machines mount cgroup v1;
// eviction thresholds low, since the disk is shared with everything else.
func kubeletConfig(d dirs, caFile string, serving certificate) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
tlsCertFile: %q
tlsPrivateKeyFile: %q
clusterDomain: %s
readOnlyPort: 0
healthzPort: 0
podLogsDir: %q
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
`, caFile, d.containerdSocket, serving.cert, serving.key, clusterDomain, d.podLogs)
}

// kubeProxyConfig: iptables mode. maxPerCore 0 leaves the conntrack sysctls
// alone, which the sandbox may not change.
// localhostNodePorts off: it would set route_localnet, and no test reaches
// a NodePort through localhost.
func kubeProxyConfig(kubeconfig, nodeName string, metricsPort, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %q}
hostnameOverride: %q
clusterCIDR: %q
conntrack: {maxPerCore: 0}
iptables: {localhostNodePorts: false}
healthzBindAddress: "127.0.0.1:%d"
metricsBindAddress: "127.0.0.1:%d"
`, kubeconfig, nodeName, podCIDR, healthzPort, metricsPort)
}

// quoteArgs renders a command line for a log.
func quoteArgs(args []string) string {
	return strings.Join(args, " ")
}
