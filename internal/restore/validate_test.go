package restore

import (
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Velero's server takes writeSparseFiles and any parallelFilesDownload (0
// or less meaning its default).
func TestValidateAcceptsUploaderConfig(t *testing.T) {
	yes, no := true, false
	for _, c := range []v1.UploaderConfigForRestore{
		{WriteSparseFiles: &yes, ParallelFilesDownload: 3},
		{WriteSparseFiles: &no},
		{ParallelFilesDownload: -1},
	} {
		spec := v1.RestoreSpec{BackupName: "b", UploaderConfig: &c}
		if msgs := Validate(&spec); len(msgs) > 0 {
			t.Errorf("%+v: %v", c, msgs)
		}
	}
}
