// Package api is what a Lifeboat (or Velero) plugin implements: one Go
// interface per plugin kind, and the small types they exchange with the
// server. A plugin binary registers implementations with
// framework.NewServer().RegisterXxx(name, initializer) and calls Serve; the
// server talks to it over Velero's gRPC plugin protocol, so the same binary
// runs under both.
//
// Items are passed as runtime.Unstructured (the object's JSON as stored in
// the backup); backups and restores as the velero.io/v1 types.
//
// Lifeboat's own code takes plugins through these interfaces too: the
// plugin host hands the backup, restore and deletion engines an
// ObjectStore, a BackupItemAction or a DeleteItemAction whether it is a
// plugin process or built in. Kind and AllKinds name the kinds, and
// ValidateName checks a plugin's name.
package api
