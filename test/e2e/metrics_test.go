package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// A Velero user's dashboards and alerts read Velero's metrics, and `kubectl
// describe` shows Events. Here a real `lifeboat server` process, on its own
// namespace and running as install's service account (so that its RBAC is
// what lets it write Events), takes a scheduled backup, manual backups that
// complete, fail and fail validation, restores and a deletion; each step's
// /metrics, read with Prometheus' text parser, must say what Velero's
// would, and the objects must carry their Events. A process of its own
// keeps the counters of the package's other servers out.

// veleroBuckets are Velero's backup duration buckets, in seconds.
var veleroBuckets = []float64{60, 300, 600, 900, 1800, 3600, 7200, 10800, 14400}

func TestVeleroMetricsAndEvents(t *testing.T) {
	ns := env.NewNamespace(t, "metrics")
	app := env.NewNamespace(t, "metricsapp")
	big := env.NewNamespace(t, "metricsbig")
	for _, n := range []string{"one", "two"} {
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: n}, Data: map[string]string{"k": n}})
	}
	hostPathClaim(t, app, "data")
	// Past the server's --max-item-size: a backup of it fails half-way.
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: big, Name: "huge"}, Data: map[string]string{"k": strings.Repeat("x", 200<<10)}})

	srv := startMetricsServer(t, ns)
	s := srv.scrape(t)
	// At start, as Velero: the series of backups made by hand exist at 0
	// (last status 1); the totals count what is there.
	for _, name := range []string{
		"velero_backup_attempt_total", "velero_backup_success_total", "velero_backup_partial_failure_total",
		"velero_backup_failure_total", "velero_backup_validation_failure_total", "velero_backup_warning_total",
		"velero_backup_items_total", "velero_backup_items_errors",
		"velero_restore_attempt_total", "velero_restore_success_total", "velero_restore_partial_failure_total",
		"velero_restore_failed_total", "velero_restore_validation_failed_total",
		"velero_volume_snapshot_attempt_total", "velero_volume_snapshot_success_total", "velero_volume_snapshot_failure_total",
		"velero_backup_deletion_attempt_total", "velero_backup_deletion_success_total", "velero_backup_deletion_failure_total",
	} {
		s.expect(t, name, 0, "schedule", "")
	}
	s.expect(t, "velero_backup_last_status", 1, "schedule", "")
	for _, name := range []string{"velero_csi_snapshot_attempt_total", "velero_csi_snapshot_success_total", "velero_csi_snapshot_failure_total"} {
		s.expect(t, name, 0, "schedule", "", "backupName", "")
	}
	s.expect(t, "velero_backup_total", 0)
	s.expect(t, "velero_restore_total", 0)
	s.absent(t, "velero_backup_last_successful_timestamp", "schedule", "")
	s.absent(t, "velero_backup_duration_seconds", "schedule", "")

	good := srv.location(t, "good", true)
	broken := srv.location(t, "broken", false)
	vsl := &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "files"},
		Spec:       v1.VolumeSnapshotLocationSpec{Provider: "example.io/filesnapshotter", Config: map[string]string{"dir": t.TempDir()}},
	}
	env.Create(t, vsl)

	// Failures first: a store that cannot be used (Failed before anything
	// is written), a location that does not exist (FailedValidation), an
	// item past the limits (Failed half-way).
	brokenBackup := srv.backup(t, "broken", v1.BackupSpec{StorageLocation: broken, IncludedNamespaces: []string{app}}, v1.BackupPhaseFailed)
	srv.backup(t, "invalid", v1.BackupSpec{StorageLocation: "no-such-location"}, v1.BackupPhaseFailedValidation)
	tooBig := srv.backup(t, "toobig", v1.BackupSpec{StorageLocation: good, IncludedNamespaces: []string{big}}, v1.BackupPhaseFailed)
	s = srv.scrape(t)
	s.expect(t, "velero_backup_attempt_total", 2, "schedule", "")
	s.expect(t, "velero_backup_failure_total", 2, "schedule", "")
	s.expect(t, "velero_backup_validation_failure_total", 1, "schedule", "")
	s.expect(t, "velero_backup_success_total", 0, "schedule", "")
	s.expect(t, "velero_backup_last_status", 0, "schedule", "")
	// Only the backup that got to write is timed and sized, as in Velero.
	s.histogram(t, "velero_backup_duration_seconds", 1, "schedule", "")
	if size := s.value(t, "velero_backup_tarball_size_bytes", "schedule", ""); size <= 0 {
		t.Errorf("velero_backup_tarball_size_bytes{schedule=\"\"} = %v after the half-written backup, want its size", size)
	}
	s.expect(t, "velero_backup_items_total", float64(tooBig.Status.Progress.TotalItems), "schedule", "")
	s.expect(t, "velero_backup_location_status_gauge", 1, "backup_location_name", good)
	s.expect(t, "velero_backup_location_status_gauge", 0, "backup_location_name", broken)
	s.expect(t, "velero_backup_total", 3)

	// A schedule's series start at 0 when it appears; its first backup
	// runs at once and carries its name. Then a manual backup completes.
	template := v1.BackupSpec{StorageLocation: good, IncludedNamespaces: []string{app}, VolumeSnapshotLocations: []string{vsl.Name}}
	env.Create(t, &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: v1.ScheduleSpec{Schedule: "@every 24h", Template: template}})
	nightly := srv.scheduledBackup(t, "nightly")
	manual := srv.backup(t, "manual", template, v1.BackupPhaseCompleted)
	s = srv.scrape(t)
	for schedule, b := range map[string]*v1.Backup{"nightly": nightly, "": manual} {
		s.expect(t, "velero_backup_success_total", 1, "schedule", schedule)
		s.expect(t, "velero_backup_last_status", 1, "schedule", schedule)
		s.expect(t, "velero_backup_tarball_size_bytes", float64(srv.archiveSize(t, b)), "schedule", schedule)
		s.expect(t, "velero_backup_items_total", float64(b.Status.Progress.TotalItems), "schedule", schedule)
		s.expect(t, "velero_backup_items_errors", 0, "schedule", schedule)
		s.expect(t, "velero_volume_snapshot_attempt_total", 1, "schedule", schedule)
		s.expect(t, "velero_volume_snapshot_success_total", 1, "schedule", schedule)
		s.expect(t, "velero_volume_snapshot_failure_total", 0, "schedule", schedule)
		s.expect(t, "velero_backup_last_successful_timestamp", float64(b.Status.CompletionTimestamp.Unix()), "schedule", schedule)
	}
	s.expect(t, "velero_backup_attempt_total", 1, "schedule", "nightly")
	s.expect(t, "velero_backup_attempt_total", 3, "schedule", "")
	s.expect(t, "velero_backup_failure_total", 0, "schedule", "nightly")
	s.histogram(t, "velero_backup_duration_seconds", 1, "schedule", "nightly")
	s.histogram(t, "velero_backup_duration_seconds", 2, "schedule", "")
	s.expect(t, "velero_restore_attempt_total", 0, "schedule", "nightly")
	s.expect(t, "velero_csi_snapshot_attempt_total", 0, "schedule", "nightly", "backupName", "")
	s.expect(t, "velero_backup_warning_total", warned(nightly), "schedule", "nightly")
	s.expect(t, "velero_backup_warning_total", warned(tooBig, manual), "schedule", "")
	s.expect(t, "velero_backup_total", 5)
	// Velero's well-known alert, `time() - velero_backup_last_successful_timestamp
	// > 86400`, is quiet: the last success is seconds old.
	if age := time.Since(time.Unix(int64(s.value(t, "velero_backup_last_successful_timestamp", "schedule", "nightly")), 0)); age > time.Hour {
		t.Errorf("the last successful backup of nightly is %s old", age)
	}

	// Restores: one completes, one names a backup that does not exist.
	restored := env.NewNamespace(t, "metricsrestored")
	back := srv.restore(t, "back", v1.RestoreSpec{BackupName: manual.Name, IncludedResources: []string{"configmaps"},
		NamespaceMapping: map[string]string{app: restored}}, v1.RestorePhaseCompleted)
	srv.restore(t, "nothing", v1.RestoreSpec{BackupName: "no-such-backup"}, v1.RestorePhaseFailedValidation)
	s = srv.scrape(t)
	s.expect(t, "velero_restore_attempt_total", 2, "schedule", "")
	s.expect(t, "velero_restore_success_total", 1, "schedule", "")
	s.expect(t, "velero_restore_validation_failed_total", 1, "schedule", "")
	s.expect(t, "velero_restore_failed_total", 0, "schedule", "")
	s.expect(t, "velero_restore_partial_failure_total", 0, "schedule", "")
	s.expect(t, "velero_restore_total", 2)

	// The manual backup is deleted, with its restore. Its last success
	// stays: an alert on its age must go on firing.
	dbr := &v1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "delete-manual"}, Spec: v1.DeleteBackupRequestSpec{BackupName: manual.Name}}
	env.Create(t, dbr)
	srv.poll(t, "the manual backup to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(manual), &v1.Backup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	// The request ends after its last step removed the Backup, and counts
	// its outcome as it ends: wait for that, not only for the Backup.
	srv.poll(t, "the deletion request to be processed", func(ctx context.Context) (bool, error) {
		var got v1.DeleteBackupRequest
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(dbr), &got)
		return err == nil && got.Status.Phase == v1.DeleteBackupRequestPhaseProcessed, client.IgnoreNotFound(err)
	})
	s = srv.scrape(t)
	s.expect(t, "velero_backup_deletion_attempt_total", 1, "schedule", "")
	s.expect(t, "velero_backup_deletion_success_total", 1, "schedule", "")
	s.expect(t, "velero_backup_deletion_failure_total", 0, "schedule", "")
	s.expect(t, "velero_backup_total", 4)
	s.expect(t, "velero_restore_total", 1)
	s.expect(t, "velero_backup_last_successful_timestamp", float64(manual.Status.CompletionTimestamp.Unix()), "schedule", "")
	checkFamilies(t, s)

	// Deleting the schedule removes its series, as in Velero; the time of
	// its last success comes from its backup, which is still there.
	if err := env.Client.Delete(testenv.Ctx(t), &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}}); err != nil {
		t.Fatal(err)
	}
	srv.poll(t, "the schedule's series to go", func(context.Context) (bool, error) {
		_, ok := srv.scrape(t).series("velero_backup_attempt_total", "schedule", "nightly")
		return !ok, nil
	})
	srv.scrape(t).expect(t, "velero_backup_last_successful_timestamp", float64(nightly.Status.CompletionTimestamp.Unix()), "schedule", "nightly")

	// Events: what happened to each object, with the reasons `kubectl
	// describe` shows.
	waitForEvents(t, ns, map[string][]string{
		"Backup/" + manual.Name:           {"Normal BackupStarted", "Normal BackupCompleted"},
		"Backup/" + nightly.Name:          {"Normal BackupStarted", "Normal BackupCompleted"},
		"Backup/" + brokenBackup.Name:     {"Normal BackupStarted", "Warning BackupFailed"},
		"Backup/invalid":                  {"Warning BackupFailedValidation"},
		"Backup/" + tooBig.Name:           {"Normal BackupStarted", "Warning BackupFailed"},
		"Restore/" + back.Name:            {"Normal RestoreStarted", "Normal RestoreCompleted"},
		"Restore/nothing":                 {"Warning RestoreFailedValidation"},
		"DeleteBackupRequest/" + dbr.Name: {"Normal DeletionStarted", "Normal BackupDeleted"},
	}, map[string]string{
		// The notes name the backup and say what went wrong.
		"Backup/" + brokenBackup.Name:     `backup ` + ns + `/broken failed: storage location "` + broken + `"`,
		"Backup/invalid":                  `spec.storageLocation`,
		"Backup/" + tooBig.Name:           `--max-item-size`,
		"DeleteBackupRequest/" + dbr.Name: "backup " + ns + "/manual deleted",
	})
}

// warned counts the backups that ended with warnings (what
// velero_backup_warning_total counts).
func warned(backups ...*v1.Backup) float64 {
	n := 0.0
	for _, b := range backups {
		if b.Status.Warnings > 0 {
			n++
		}
	}
	return n
}

// checkFamilies checks the type and label names of every Velero metric
// served, against Velero v1.18's.
func checkFamilies(t *testing.T, s scrape) {
	t.Helper()
	counter, gauge, histogram := dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
	want := map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"velero_backup_total":                     {gauge, nil},
		"velero_backup_attempt_total":             {counter, []string{"schedule"}},
		"velero_backup_success_total":             {counter, []string{"schedule"}},
		"velero_backup_partial_failure_total":     {counter, []string{"schedule"}},
		"velero_backup_failure_total":             {counter, []string{"schedule"}},
		"velero_backup_validation_failure_total":  {counter, []string{"schedule"}},
		"velero_backup_warning_total":             {counter, []string{"schedule"}},
		"velero_backup_duration_seconds":          {histogram, []string{"schedule"}},
		"velero_backup_last_successful_timestamp": {gauge, []string{"schedule"}},
		"velero_backup_last_status":               {gauge, []string{"schedule"}},
		"velero_backup_tarball_size_bytes":        {gauge, []string{"schedule"}},
		"velero_backup_items_total":               {gauge, []string{"schedule"}},
		"velero_backup_items_errors":              {gauge, []string{"schedule"}},
		"velero_backup_deletion_attempt_total":    {counter, []string{"schedule"}},
		"velero_backup_deletion_success_total":    {counter, []string{"schedule"}},
		"velero_backup_deletion_failure_total":    {counter, []string{"schedule"}},
		"velero_backup_location_status_gauge":     {gauge, []string{"backup_location_name"}},
		"velero_restore_total":                    {gauge, nil},
		"velero_restore_attempt_total":            {counter, []string{"schedule"}},
		"velero_restore_success_total":            {counter, []string{"schedule"}},
		"velero_restore_partial_failure_total":    {counter, []string{"schedule"}},
		"velero_restore_failed_total":             {counter, []string{"schedule"}},
		"velero_restore_validation_failed_total":  {counter, []string{"schedule"}},
		"velero_volume_snapshot_attempt_total":    {counter, []string{"schedule"}},
		"velero_volume_snapshot_success_total":    {counter, []string{"schedule"}},
		"velero_volume_snapshot_failure_total":    {counter, []string{"schedule"}},
		"velero_csi_snapshot_attempt_total":       {counter, []string{"backupName", "schedule"}},
		"velero_csi_snapshot_success_total":       {counter, []string{"backupName", "schedule"}},
		"velero_csi_snapshot_failure_total":       {counter, []string{"backupName", "schedule"}},
	}
	for name, w := range want {
		f, ok := s[name]
		if !ok {
			t.Errorf("%s is not served", name)
			continue
		}
		if f.GetType() != w.typ {
			t.Errorf("%s is a %s, want %s", name, f.GetType(), w.typ)
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			sort.Strings(names)
			if !slices.Equal(names, w.labels) {
				t.Errorf("%s has labels %v, want %v", name, names, w.labels)
			}
			if h := m.GetHistogram(); h != nil {
				var bounds []float64
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						bounds = append(bounds, b.GetUpperBound())
					}
				}
				if !slices.Equal(bounds, veleroBuckets) {
					t.Errorf("%s has buckets %v, want Velero's %v", name, bounds, veleroBuckets)
				}
			}
		}
	}
	for name := range s {
		if strings.HasPrefix(name, "velero_") {
			if _, ok := want[name]; !ok && !strings.HasPrefix(name, "velero_backup_deletion") {
				t.Errorf("%s is served but is not a Velero metric this test knows", name)
			}
		}
	}
}

// metricsServer is a `lifeboat server` process serving namespace ns, with
// its metrics on addr.
type metricsServer struct {
	*serverProcess
	ns, addr string
}

func startMetricsServer(t *testing.T, ns string) *metricsServer {
	t.Helper()
	bin := lifeboatBinary(t)
	plugins := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", plugins+"/", "../../examples/plugins/filesnapshotter").CombinedOutput(); err != nil {
		t.Fatalf("building the filesnapshotter example: %v\n%s", err, out)
	}
	// The server's own identity: install's service account and RBAC.
	cfg, err := env.ServerConfig(ns)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := localcluster.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	addr := freeAddress(t)
	p := startServerProcess(t, bin, []string{"server", "--kubeconfig", kubeconfig, "-n", ns,
		"--plugin-dir", plugins, "--metrics-address", addr, "--health-address", "0", "--log-level", "info",
		"--store-validation-frequency", "1s", "--backup-sync-period", "0", "--max-item-size", "100Ki",
		"--leader-elect-lease-duration", twoLease.String(), "--leader-elect-renew-deadline", twoRenew.String(),
		"--leader-elect-retry-period", twoRetry.String()},
		[]string{"KUBECONFIG=" + kubeconfig}, filepath.Join(t.TempDir(), "server.log"))
	m := &metricsServer{serverProcess: p, ns: ns, addr: addr}
	m.poll(t, "the server to lead", func(context.Context) (bool, error) {
		s, err := m.tryScrape()
		if err != nil {
			return false, nil
		}
		v, ok := s.series("lifeboat_leader")
		return ok && v.GetGauge().GetValue() == 1, nil
	})
	return m
}

// scrape is one read of /metrics, by family name.
type scrape map[string]*dto.MetricFamily

func (m *metricsServer) tryScrape() (scrape, error) {
	if err := m.exited(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return families, nil
}

func (m *metricsServer) scrape(t *testing.T) scrape {
	t.Helper()
	s, err := m.tryScrape()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// series finds the series of name whose labels are exactly the pairs.
func (s scrape) series(name string, pairs ...string) (*dto.Metric, bool) {
	f, ok := s[name]
	if !ok {
		return nil, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		want[pairs[i]] = pairs[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func describe(name string, pairs []string) string {
	var ls []string
	for i := 0; i+1 < len(pairs); i += 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", pairs[i], pairs[i+1]))
	}
	return name + "{" + strings.Join(ls, ",") + "}"
}

// value reads a counter's or gauge's value; the series must exist.
func (s scrape) value(t *testing.T, name string, pairs ...string) float64 {
	t.Helper()
	m, ok := s.series(name, pairs...)
	if !ok {
		t.Errorf("%s is not served", describe(name, pairs))
		return math.NaN()
	}
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	t.Errorf("%s is neither a counter nor a gauge", describe(name, pairs))
	return math.NaN()
}

func (s scrape) expect(t *testing.T, name string, want float64, pairs ...string) {
	t.Helper()
	if got := s.value(t, name, pairs...); got != want && !math.IsNaN(got) {
		t.Errorf("%s = %v, want %v", describe(name, pairs), got, want)
	}
}

func (s scrape) absent(t *testing.T, name string, pairs ...string) {
	t.Helper()
	if _, ok := s.series(name, pairs...); ok {
		t.Errorf("%s is served, want it absent", describe(name, pairs))
	}
}

// histogram checks how many observations a histogram series has.
func (s scrape) histogram(t *testing.T, name string, count uint64, pairs ...string) {
	t.Helper()
	m, ok := s.series(name, pairs...)
	if !ok || m.GetHistogram() == nil {
		t.Errorf("%s is not a served histogram", describe(name, pairs))
		return
	}
	if got := m.GetHistogram().GetSampleCount(); got != count {
		t.Errorf("%s has %d observations, want %d", describe(name, pairs), got, count)
	}
}

func (m *metricsServer) poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := m.exited(); err != nil {
			return false, err
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// location creates a filesystem storage location over a fresh bucket
// directory, or over one that does not exist (unusable), and waits for its
// phase.
func (m *metricsServer) location(t *testing.T, name string, usable bool) string {
	t.Helper()
	bucket := env.Name("metrics-" + name)
	if usable {
		if err := os.MkdirAll(filepath.Join(env.StoreRoot, bucket), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env.Create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: name},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": env.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: "lifeboat"}},
		},
	})
	want := v1.BackupStorageLocationPhaseUnavailable
	if usable {
		want = v1.BackupStorageLocationPhaseAvailable
	}
	m.poll(t, "location "+name+" to be "+string(want), func(ctx context.Context) (bool, error) {
		var bsl v1.BackupStorageLocation
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, &bsl)
		return err == nil && bsl.Status.Phase == want, client.IgnoreNotFound(err)
	})
	return name
}

// backup creates a backup and waits for it to end in phase.
func (m *metricsServer) backup(t *testing.T, name string, spec v1.BackupSpec, phase v1.BackupPhase) *v1.Backup {
	t.Helper()
	env.Create(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: name}, Spec: spec})
	return m.waitBackup(t, name, phase)
}

func (m *metricsServer) waitBackup(t *testing.T, name string, phase v1.BackupPhase) *v1.Backup {
	t.Helper()
	var b v1.Backup
	m.poll(t, "backup "+name+" to end", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, &b)
		return err == nil && b.Status.Phase.IsTerminal(), client.IgnoreNotFound(err)
	})
	if b.Status.Phase != phase {
		t.Fatalf("backup %s ended %s (%q %v), want %s", name, b.Status.Phase, b.Status.FailureReason, b.Status.ValidationErrors, phase)
	}
	return &b
}

// scheduledBackup waits for the first backup of a schedule and for it to
// complete.
func (m *metricsServer) scheduledBackup(t *testing.T, schedule string) *v1.Backup {
	t.Helper()
	var name string
	m.poll(t, "schedule "+schedule+" to create a backup", func(ctx context.Context) (bool, error) {
		var list v1.BackupList
		if err := env.Client.List(ctx, &list, client.InNamespace(m.ns), client.MatchingLabels{v1.ScheduleNameLabel: schedule}); err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			name = list.Items[0].Name
		}
		return name != "", nil
	})
	return m.waitBackup(t, name, v1.BackupPhaseCompleted)
}

func (m *metricsServer) restore(t *testing.T, name string, spec v1.RestoreSpec, phase v1.RestorePhase) *v1.Restore {
	t.Helper()
	env.Create(t, &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: name}, Spec: spec})
	var rs v1.Restore
	m.poll(t, "restore "+name+" to end", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, &rs)
		switch rs.Status.Phase {
		case v1.RestorePhaseCompleted, v1.RestorePhasePartiallyFailed, v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if rs.Status.Phase != phase {
		t.Fatalf("restore %s ended %s (%q %v), want %s", name, rs.Status.Phase, rs.Status.FailureReason, rs.Status.ValidationErrors, phase)
	}
	return &rs
}

// archiveSize is the size of a backup's stored archive.
func (m *metricsServer) archiveSize(t *testing.T, b *v1.Backup) int64 {
	t.Helper()
	var bsl v1.BackupStorageLocation
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: m.ns, Name: b.Spec.StorageLocation}, &bsl); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(env.StoreRoot, bsl.Spec.ObjectStorage.Bucket, "lifeboat", "backups", b.Name, b.Name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// waitForEvents waits until each object ("Kind/name") of namespace ns has
// at least the events want lists ("Type Reason"), all reported by
// Lifeboat, and checks that each note in notes is in one of the object's
// events.
func waitForEvents(t *testing.T, ns string, want map[string][]string, notes map[string]string) {
	t.Helper()
	var have map[string][]string
	var text map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		have, text = map[string][]string{}, map[string]string{}
		for _, e := range list.Items {
			key := e.Regarding.Kind + "/" + e.Regarding.Name
			have[key] = append(have[key], e.Type+" "+e.Reason)
			text[key] += e.Note + "\n"
			if e.ReportingController != "lifeboat" && e.Regarding.Kind != "Lease" {
				return false, fmt.Errorf("event %s/%s reported by %q, want lifeboat", e.Regarding.Kind, e.Regarding.Name, e.ReportingController)
			}
		}
		for key, reasons := range want {
			for _, r := range reasons {
				if !slices.Contains(have[key], r) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		got := map[string][]string{}
		for key := range want {
			got[key] = have[key]
		}
		t.Fatalf("events: %v\nwant %v\nhave %v", err, want, got)
	}
	for key, note := range notes {
		if !strings.Contains(text[key], note) {
			t.Errorf("the events of %s do not say %q:\n%s", key, note, text[key])
		}
	}
}

// hostPathClaim creates a claim in ns and a hostPath PV bound to it (no
// controller binds them here, so the claim's status says Bound).
func hostPathClaim(t *testing.T, ns, name string) {
	t.Helper()
	class := "manual"
	env.Create(t, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + ns}},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
		},
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       ns + "-" + name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	env.Create(t, pvc)
	pvc.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(testenv.Ctx(t), pvc); err != nil {
		t.Fatal(err)
	}
}
