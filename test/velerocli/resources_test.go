package velerocli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// TestVersionAndPlugins: `velero version` shows its own version and the
// Lifeboat server's, and `velero plugin get` the server's plugins, both
// answered through ServerStatusRequests.
func TestVersionAndPlugins(t *testing.T) {
	// --timeout: the CLI waits 5s for the answer by default, too short on a
	// machine running the whole test suite.
	out := velero(t, "version", "--timeout", "30s")
	// The server reports the Velero version it speaks with its own as
	// build metadata, so the CLI sees matching versions and warns of none.
	mustContain(t, "version", out, "Client:\n\tVersion: v1.18.3\n", "Server:\n\tVersion: "+buildinfo.ServerVersion(buildinfo.Version)+"\n")
	out = velero(t, "plugin", "get", "--timeout", "30s")
	for _, want := range [][]string{
		{"velero.io/aws", "ObjectStore"},
		{"lifeboat.io/filesystem", "ObjectStore"},
	} {
		if lineWith(out, want...) == "" {
			t.Errorf("plugin get: no row with %v:\n%s", want, out)
		}
	}
}

// TestScheduleWithVeleroCLI creates, reads, pauses, resumes, backs up from
// and deletes a schedule.
func TestScheduleWithVeleroCLI(t *testing.T) {
	defaultLocation(t)
	ns := workload(t)
	name := env.Name("daily")
	out := velero(t, "schedule", "create", name, "--schedule", "0 3 * * *", "--include-namespaces", ns, "--ttl", "48h")
	mustContain(t, "schedule create", out, `Schedule "`+name+`" created successfully.`)
	sched := waitSchedulePhase(t, name, v1.SchedulePhaseEnabled)
	if sched.Spec.Template.IncludedNamespaces[0] != ns {
		t.Errorf("schedule's namespaces = %v, want [%s]", sched.Spec.Template.IncludedNamespaces, ns)
	}

	out = velero(t, "schedule", "get")
	if row := lineWith(out, name, "Enabled", "0 3 * * *", "48h0m0s"); row == "" {
		t.Errorf("schedule get: no row with %s, Enabled, its cron and TTL:\n%s", name, out)
	}
	out = velero(t, "schedule", "describe", name)
	mustContain(t, "schedule describe", out,
		"Name:         "+name,
		"Phase:  Enabled",
		"Paused:  false",
		"Schedule:  0 3 * * *",
		"Included:  "+ns,
		"TTL:  48h0m0s",
	)

	out = velero(t, "schedule", "pause", name)
	mustContain(t, "schedule pause", out, "Schedule "+name+" paused successfully")
	if s := getSchedule(t, name); !s.Spec.Paused {
		t.Errorf("schedule %s not paused after `velero schedule pause`", name)
	}
	out = velero(t, "schedule", "describe", name)
	mustContain(t, "schedule describe (paused)", out, "Paused:  true")
	out = velero(t, "schedule", "unpause", name)
	mustContain(t, "schedule unpause", out, "Schedule "+name+" unpaused successfully")
	if s := getSchedule(t, name); s.Spec.Paused {
		t.Errorf("schedule %s still paused after `velero schedule unpause`", name)
	}

	// A backup now, from the schedule's template (labelled with the
	// schedule, as Velero's CLI labels it).
	backup := name + "-now"
	out = velero(t, "backup", "create", backup, "--from-schedule", name, "--wait")
	mustContain(t, "backup create --from-schedule", out,
		"Creating backup from schedule, all other filters are ignored.",
		"Backup completed with status: Completed.")
	out = velero(t, "backup", "describe", backup)
	mustContain(t, "backup describe (from schedule)", out, "velero.io/schedule-name="+name, "Included:  "+ns, "TTL:  48h0m0s")

	out = velero(t, "schedule", "delete", name, "--confirm")
	mustContain(t, "schedule delete", out, "Schedule deleted: "+name)
	waitGone(t, &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: name}}, time.Minute)
}

func getSchedule(t *testing.T, name string) *v1.Schedule {
	t.Helper()
	var s v1.Schedule
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: env.Namespace, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func waitSchedulePhase(t *testing.T, name string, phase v1.SchedulePhase) *v1.Schedule {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := getSchedule(t, name)
		if s.Status.Phase == phase {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s did not become %s (phase %q)", name, phase, s.Status.Phase)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLocationsWithVeleroCLI creates a second backup location with
// `velero backup-location create` (its CA inline, from --cacert), makes it
// the default with `set`, backs up to it, makes the first the default
// again, deletes the second, and creates and lists a volume snapshot
// location.
func TestLocationsWithVeleroCLI(t *testing.T) {
	first, _ := defaultLocation(t)
	out := velero(t, "backup-location", "get")
	if row := lineWith(out, first, "Available", "true"); row == "" {
		t.Errorf("backup-location get: no row with %s, Available and default true:\n%s", first, out)
	}

	bucket := env.S3.NewBucket(t)
	second := env.Name("second")
	creds := second + "-credentials"
	env.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: creds},
		Data:       map[string][]byte{"cloud": env.S3.CredentialsFile()},
	})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, env.S3.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	var config []string
	for k, v := range env.S3.BSLConfig() {
		config = append(config, k+"="+v)
	}
	out = velero(t, "backup-location", "create", second,
		"--provider", "aws", "--bucket", bucket, "--prefix", "team",
		"--config", strings.Join(config, ","),
		"--credential", creds+"=cloud", "--cacert", caFile)
	mustContain(t, "backup-location create", out, `Backup storage location "`+second+`" configured successfully.`)
	env.WaitLocationPhase(t, second, v1.BackupStorageLocationPhaseAvailable, time.Minute)
	out = velero(t, "backup-location", "get", second)
	if row := lineWith(out, second, "aws", bucket+"/team", "Available", "ReadWrite"); row == "" {
		t.Errorf("backup-location get %s: no row with aws, %s/team, Available, ReadWrite:\n%s", second, bucket, out)
	}

	// One default at a time: Velero's `set --default` refuses while another
	// location is the default, so the first is unset first.
	velero(t, "backup-location", "set", first, "--default=false")
	out = velero(t, "backup-location", "set", second, "--default", "--cacert", caFile)
	mustContain(t, "backup-location set", out, `Backup storage location "`+second+`" configured successfully.`)
	out = velero(t, "backup-location", "get", "--default")
	if lineWith(out, second) == "" || lineWith(out, first) != "" {
		t.Errorf("backup-location get --default: want only %s:\n%s", second, out)
	}

	// A backup without --storage-location goes to the new default, and its
	// logs come through the inline CA.
	ns := workload(t)
	backup := env.Name("to-second")
	out = velero(t, "backup", "create", backup, "--include-namespaces", ns, "--wait")
	mustContain(t, "backup create", out, "Backup completed with status: Completed.")
	out = velero(t, "backup", "describe", backup)
	mustContain(t, "backup describe", out, "Storage Location:  "+second)
	if keys := env.S3.Keys(t, bucket, "team/backups/"+backup+"/"); len(keys) == 0 {
		t.Errorf("backup %s is not in the second location's bucket %s under team/", backup, bucket)
	}
	out = velero(t, "backup", "logs", backup)
	if !strings.Contains(out, backup) {
		t.Errorf("backup logs do not name the backup %s:\n%s", backup, out)
	}

	velero(t, "backup-location", "set", second, "--default=false", "--cacert", caFile)
	velero(t, "backup-location", "set", first, "--default")
	if bsl := env.WaitLocationPhase(t, first, v1.BackupStorageLocationPhaseAvailable, time.Minute); !bsl.Spec.Default {
		t.Errorf("%s is not the default again", first)
	}

	// Deleting a location deletes its Backup objects (Velero's CLI does
	// that itself), not the backups' data.
	out = velero(t, "backup-location", "delete", second, "--confirm")
	mustContain(t, "backup-location delete", out,
		`Backup storage location "`+second+`" deleted successfully.`,
		`Backup associated with deleted BSL(s) "`+backup+`" deleted successfully.`)
	waitGone(t, &v1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: second}}, time.Minute)
	waitGone(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: backup}}, time.Minute)
	if keys := env.S3.Keys(t, bucket, "team/backups/"+backup+"/"); len(keys) == 0 {
		t.Errorf("deleting location %s deleted the data of backup %s too", second, backup)
	}

	vsl := env.Name("snapshots")
	out = velero(t, "snapshot-location", "create", vsl, "--provider", "aws", "--config", "region=us-east-1")
	mustContain(t, "snapshot-location create", out, `Snapshot volume location "`+vsl+`" configured successfully.`)
	out = velero(t, "snapshot-location", "get")
	if row := lineWith(out, vsl, "aws"); row == "" {
		t.Errorf("snapshot-location get: no row with %s and aws:\n%s", vsl, out)
	}
	var got v1.VolumeSnapshotLocation
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: env.Namespace, Name: vsl}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Provider != "aws" || got.Spec.Config["region"] != "us-east-1" {
		t.Errorf("created VolumeSnapshotLocation spec = %+v", got.Spec)
	}
}
