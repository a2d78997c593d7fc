package backup

import (
	"strings"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// uploaderConfig.parallelFilesUpload reaches the node agent (the
// PodVolumeBackups' ParallelFilesUpload), so it is taken; a negative one
// is refused, naming the field.
func TestValidateUploaderConfig(t *testing.T) {
	for n, want := range map[int]string{0: "", 4: "", -1: "spec.uploaderConfig.parallelFilesUpload: -1 is negative"} {
		msgs := Validate(&v1.BackupSpec{UploaderConfig: &v1.UploaderConfigForBackup{ParallelFilesUpload: n}})
		got := strings.Join(msgs, "; ")
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("parallelFilesUpload %d: %q, want %q", n, got, want)
		}
	}
}
