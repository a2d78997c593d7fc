// Package api is what a Lifeboat (or Velero) plugin implements: one Go
// interface per plugin kind, and the small types they exchange with the
// server. A plugin binary registers implementations with
// framework.NewServer().RegisterXxx(name, initializer) and calls Serve; the
// server talks to it over Velero's gRPC plugin protocol, so the same binary
// runs under both.
//
// Items are passed as runtime.Unstructured (the object's JSON as stored in
// the backup); backups and restores as the velero.io/v1 types.
package api
