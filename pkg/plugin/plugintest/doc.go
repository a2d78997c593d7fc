// Package plugintest is for plugin authors' tests: it serves a plugin in
// the test's own process and hands back the client Lifeboat's server would
// use, so a test calls the plugin exactly as the server will, through the
// real plugin protocol (go-plugin's gRPC transport, protobuf messages, the
// items and backups as JSON, errors as gRPC status errors), with no binary
// to build and no process to start. It plays the part go-plugin's
// TestPluginGRPCConn plays for go-plugin's own plugins.
//
// To test one implementation, hand it to the function of its kind:
//
//	func TestCleanup(t *testing.T) {
//		dia := plugintest.DeleteItemAction(t, "example.io/cleanup", &cleanup{})
//		err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: item, Backup: backup})
//		...
//	}
//
// To test what a binary serves (its registrations and initializers), build
// the same framework.Server its main serves and pass it to Serve:
//
//	conn := plugintest.Serve(t, newServer())
//	conn.Plugins()                                     // what `lifeboat plugin get` lists
//	vs := conn.VolumeSnapshotter("example.io/snapper") // the server's client of it
//
// A call the plugin fails comes back as a *framework.PluginError naming
// the plugin and the method, with the plugin's message and the gRPC code
// (Unknown for the plugin's own error, Aborted for a panic, NotFound for a
// name the process does not serve), as the server sees it. Each call is
// bounded by DefaultTimeout unless Conn.WithTimeout says otherwise.
//
// What this does not cover is the process boundary and the server's own
// rules around it: the handshake, flags, logging over stderr, the server's
// per-kind timeouts, restarts and message-size limit
// (--plugin-max-message-size). The framework tests the first with a built
// binary; an end-to-end test with the plugin installed in a server covers
// the rest.
package plugintest
