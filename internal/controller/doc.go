// Package controller holds the server's reconcilers for the velero.io/v1
// kinds, registered with the controller-runtime manager by internal/server
// (their only user outside tests).
//
// The rule for every reconciler here is to stay thin: read the object,
// decide with plain code what to do (validation, waiting, refusing), hand
// the work to an engine, and write the outcome to the object's status.
// The work itself (listing the cluster, reading and writing archives,
// calling plugins, deleting from storage) lives in the engines below,
// internal/backup, internal/restore and internal/deletion, which never
// import this package. Around that rule:
//
//   - Every status change goes through the package's one status writer
//     (status.go): a write made on what was read, with its resourceVersion
//     as a precondition, so that a second server or a stale cache can
//     never undo or repeat a transition (docs/architecture.md, "One server
//     acts").
//   - Conditions are set together with the phase (conditions.go), so that
//     `kubectl wait --for=condition=...` works on every kind and the two
//     never disagree.
//   - Every call to the API server or a store gets its own timeout: a hung
//     call must not hold a reconcile worker forever.
//   - Timing rules that the CLI shares (cron parsing, when a schedule is
//     due) live in internal/schedules, not here, so that the CLI does not
//     import the controllers.
//
// The reconcilers:
//
//   - BackupReconciler runs new Backups through the backup engine, and
//     asks for the deletion of a Backup whose finalizer the operator opted
//     into.
//   - BackupOperationsReconciler follows the asynchronous operations of
//     backup item actions until they end.
//   - BackupSyncReconciler adds the backups a storage location holds and
//     the cluster lacks.
//   - BackupStorageLocationReconciler marks each location Available or
//     Unavailable.
//   - DeleteBackupRequestReconciler carries out DeleteBackupRequests with
//     the deletion engine.
//   - DownloadRequestReconciler answers DownloadRequests with a URL.
//   - GCReconciler asks for the deletion of expired backups.
//   - RestoreReconciler runs new Restores through the restore engine.
//   - ScheduleReconciler creates a Schedule's backups when they are due.
//   - ServerStatusReconciler answers ServerStatusRequests.
package controller
