// Package framework carries Lifeboat's plugins over Velero's plugin
// protocol: hashicorp/go-plugin, gRPC only, one process serving any number of
// plugins of every kind, each request naming its plugin.
//
// A plugin binary registers its implementations and serves them:
//
//	func main() {
//		framework.NewServer().
//			RegisterDeleteItemAction("example.io/cleanup", newCleanup).
//			Serve()
//	}
//
// The host (Lifeboat's plugin host, or a test) starts the binary with
// go-plugin, using Handshake and ClientPluginSet, dispenses a kind and turns
// the dispensed value into a Go interface of package api with one of the
// XxxClient constructors. Because the wire protocol is Velero's, a binary
// built with this package also runs under Velero, and a binary built with
// Velero's SDK is served to Lifeboat through these clients.
//
// One extension is Lifeboat's own: BackupItemAction Execute calls may
// travel over a single stream per plugin process
// (lifeboat.plugin.v1.BackupItemActionStream), which costs far less per
// item than Velero's unary call. Serve registers it next to Velero's
// services; BackupItemActionClient and BackupItemActionV2Client use it when
// the process serves it, and Velero's unary call when it does not. Either
// way a call's result and error are the same.
//
// Errors cross the wire as gRPC status errors carrying a generated.Stack
// detail; on the host they come back as *PluginError, which names the plugin
// and keeps the status code, so a host can tell a plugin's own failure from a
// timeout (codes.DeadlineExceeded) or a dead process (codes.Unavailable).
//
// Plugin authors use NewServer, the RegisterXxx methods and Serve, and
// WithStack or Errorf for errors that say where they came from; a plugin's
// tests use package plugintest, which serves a Server in the test's
// process and hands back the host's client of each plugin. Lifeboat's
// plugin host (internal/pluginhost) uses the rest: Handshake,
// ClientPluginSet, the XxxClient constructors and PluginError.
package framework
