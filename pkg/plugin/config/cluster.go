package config

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServerNamespace is the namespace the server runs in, where plugin
// ConfigMaps, resource policies and the velero.io objects live. A plugin
// process inherits the server's environment, and Velero's install sets
// VELERO_NAMESPACE; "velero" otherwise.
func ServerNamespace() string {
	if ns := os.Getenv("VELERO_NAMESPACE"); ns != "" {
		return ns
	}
	return "velero"
}

// KubeConfig is how a plugin reaches the cluster: the in-cluster config
// when the server runs in a pod, else the file named by KUBECONFIG (which
// a plugin process inherits from the server); nil when there is neither.
func KubeConfig() (*rest.Config, error) {
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return nil, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("reading KUBECONFIG %s: %w", path, err)
	}
	return cfg, nil
}
