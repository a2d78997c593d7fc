package cli

import (
	"strings"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// A negative count of files cannot be meant: the CLI refuses it, naming
// the flag and the fix, for backups, schedules and restores alike. (The
// server accepts such a spec, as Velero's does, with the default.)
func TestNegativeParallelFilesRefused(t *testing.T) {
	f := newTestFactory(nil)
	for _, args := range [][]string{
		{"backup", "create", "b", "--parallel-files-upload", "-1", "-o", "json"},
		{"schedule", "create", "s", "--schedule", "@daily", "--parallel-files-upload", "-2", "-o", "json"},
		{"restore", "create", "--from-backup", "b", "--parallel-files-download", "-1", "-o", "json"},
	} {
		_, _, err := run(t, f, args...)
		flag := args[len(args)-4]
		if err == nil || !strings.Contains(err.Error(), flag+" must not be negative") || !strings.Contains(err.Error(), "leave it out") {
			t.Errorf("%v: error %v, want one naming %s and the fix", args, err, flag)
		}
	}
	s := printed[v1.Schedule](t, f, "schedule", "create", "s", "--schedule", "@daily", "--parallel-files-upload", "5")
	if s.Spec.Template.UploaderConfig == nil || s.Spec.Template.UploaderConfig.ParallelFilesUpload != 5 {
		t.Errorf("schedule template uploaderConfig %+v, want parallelFilesUpload 5", s.Spec.Template.UploaderConfig)
	}
}

// describe shows the uploader settings as Velero's describe does, now
// that the node agent applies them.
func TestDescribeShowsUploaderConfig(t *testing.T) {
	web, _ := sampleBackups()
	web.Spec.UploaderConfig = &v1.UploaderConfigForBackup{ParallelFilesUpload: 6}
	yes := true
	rs := &v1.Restore{ObjectMeta: objMeta("r", nil), Spec: v1.RestoreSpec{BackupName: "web",
		UploaderConfig: &v1.UploaderConfigForRestore{WriteSparseFiles: &yes, ParallelFilesDownload: 3}}}
	s := &v1.Schedule{ObjectMeta: objMeta("nightly", nil), Spec: v1.ScheduleSpec{Schedule: "0 3 * * *", Template: web.Spec}}
	f := newTestFactory(newFakeBuilder(t, web, rs, s).Build())
	for args, want := range map[string]string{
		"backup describe web":       "Uploader config:\n Parallel files upload: 6\n",
		"schedule describe nightly": " Uploader config:\n Parallel files upload: 6\n",
		"restore describe r":        "Uploader config:\n Write Sparse Files: true\n Parallel Restore: 3\n",
	} {
		out, _, err := run(t, f, strings.Fields(args)...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("%s lacks %q:\n%s", args, want, out)
		}
	}
}
