package podvolume

import (
	"strings"
	"testing"
)

func TestBackupSettings(t *testing.T) {
	for _, tc := range []struct {
		in      map[string]string
		want    int
		wantErr string
	}{
		{in: nil, want: 0},
		{in: map[string]string{"ParallelFilesUpload": "4"}, want: 4},
		// Velero's server stores a Backup's 0 or negative count as it is;
		// its uploader then uses the default.
		{in: map[string]string{"ParallelFilesUpload": "0"}, want: 0},
		{in: map[string]string{"ParallelFilesUpload": "-3"}, want: 0},
		{in: map[string]string{"ParallelFilesUpload": "four"}, wantErr: `spec.uploaderSettings["ParallelFilesUpload"]: "four" is not a whole number`},
		{in: map[string]string{"ParallelFilesUpload": "1.5"}, wantErr: "not a whole number"},
	} {
		got, err := BackupSettings(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestRestoreSettings(t *testing.T) {
	for _, tc := range []struct {
		in         map[string]string
		sparse     bool
		parallel   int
		wantErrKey string
	}{
		{in: nil},
		{in: map[string]string{"WriteSparseFiles": "true", "ParallelFilesDownload": "3"}, sparse: true, parallel: 3},
		{in: map[string]string{"WriteSparseFiles": "false"}},
		{in: map[string]string{"ParallelFilesDownload": "-1"}},
		{in: map[string]string{"WriteSparseFiles": "yes"}, wantErrKey: "WriteSparseFiles"},
		{in: map[string]string{"ParallelFilesDownload": "x"}, wantErrKey: "ParallelFilesDownload"},
	} {
		sparse, parallel, err := RestoreSettings(tc.in)
		if tc.wantErrKey != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrKey) || !strings.Contains(err.Error(), "remove it") {
				t.Errorf("%v: error %v, want one naming %s and the fix", tc.in, err, tc.wantErrKey)
			}
			continue
		}
		if err != nil || sparse != tc.sparse || parallel != tc.parallel {
			t.Errorf("%v: %v %d %v; want %v %d", tc.in, sparse, parallel, err, tc.sparse, tc.parallel)
		}
	}
}
