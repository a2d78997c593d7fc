package backup

import (
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Velero's server takes any parallelFilesUpload (0 or less meaning its
// default): a Backup or Schedule that runs under Velero must validate here.
func TestValidateAcceptsUploaderConfig(t *testing.T) {
	for _, n := range []int{0, 4, -2} {
		spec := v1.BackupSpec{UploaderConfig: &v1.UploaderConfigForBackup{ParallelFilesUpload: n}}
		if msgs := Validate(&spec); len(msgs) > 0 {
			t.Errorf("parallelFilesUpload %d: %v", n, msgs)
		}
	}
}
