// Package config finds a plugin's configuration: a ConfigMap in the
// server's namespace labelled velero.io/plugin-config and
// "<plugin name>: <kind>", as Velero's plugins find theirs.
//
// Plugin authors call it from a plugin's initializer (see the annotate and
// custom-volume examples in examples/plugins): KubeConfig for a connection
// to the cluster the server runs in (in-cluster, or KUBECONFIG as inherited
// from the server), ServerNamespace for the namespace to look in, and Get
// for the ConfigMap itself.
package config
