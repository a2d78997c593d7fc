// Package volumehelper tells BackupItemAction plugins (and the backup
// engine) what a backup does with each volume: snapshot it, copy its files
// (fs-backup), leave it to a plugin's custom action, or nothing. It applies
// the backup's resource policy first, where the first matching volume
// policy decides, and falls back to the backup's snapshotVolumes and
// defaultVolumesToFsBackup settings and the pods' backup-volumes
// annotations as Velero does, so that a plugin built for Velero's helper
// reaches the same decisions.
//
// A helper belongs to one backup. It is safe for concurrent use, and it
// looks things up in the cluster at most once: the pods that mount each
// claim are indexed on first need, and the PersistentVolumes and claims it
// fetches are remembered, so every answer about a volume stays the same for
// the helper's lifetime.
//
// Entry points: NewVolumeHelperForBackup (a plugin, from the backup it is
// handed) and NewVolumeHelper; then ShouldPerformSnapshot,
// ShouldPerformFSBackup, ShouldPerformCustomAction and GetActionParameters,
// as in Velero, or DecideVolume / DecidePodVolume for the whole Decision
// (action, rule, parameters, reason and its typed Source), and
// ExplainVolume / ExplainPodVolume for every rule's verdict, which
// `lifeboat policy explain` prints.
package volumehelper
