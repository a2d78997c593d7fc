package podvolume

import (
	"fmt"
	"strconv"
)

// Velero's keys in a PodVolumeBackup's or PodVolumeRestore's
// spec.uploaderSettings, which its server copies from the Backup's or
// Restore's spec.uploaderConfig.
const (
	SettingParallelFilesUpload   = "ParallelFilesUpload"
	SettingWriteSparseFiles      = "WriteSparseFiles"
	SettingParallelFilesDownload = "ParallelFilesDownload"
)

// BackupSettings reads the uploader settings of a PodVolumeBackup as
// Velero's kopia uploader reads them: a missing key, or a count of zero or
// less, means the default (as many as the node has CPUs). A value that is
// not a number is an error, as in Velero.
func BackupSettings(settings map[string]string) (parallelFilesUpload int, err error) {
	return count(settings, SettingParallelFilesUpload)
}

// RestoreSettings reads the uploader settings of a PodVolumeRestore as
// Velero's kopia uploader reads them: WriteSparseFiles false unless set,
// ParallelFilesDownload as BackupSettings reads its count.
func RestoreSettings(settings map[string]string) (writeSparseFiles bool, parallelFilesDownload int, err error) {
	if v, ok := settings[SettingWriteSparseFiles]; ok {
		if writeSparseFiles, err = strconv.ParseBool(v); err != nil {
			return false, 0, fmt.Errorf("spec.uploaderSettings[%q]: %q is not true or false; set it to true or false (the Restore's spec.uploaderConfig.writeSparseFiles), or remove it", SettingWriteSparseFiles, v)
		}
	}
	parallelFilesDownload, err = count(settings, SettingParallelFilesDownload)
	return writeSparseFiles, parallelFilesDownload, err
}

func count(settings map[string]string, key string) (int, error) {
	v, ok := settings[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("spec.uploaderSettings[%q]: %q is not a whole number; set a number of files (0 for as many as the node has CPUs), or remove it", key, v)
	}
	return max(n, 0), nil
}
