package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// restorableBackup is a finished backup called name, optionally made by a
// schedule.
func restorableBackup(name, schedule string, phase v1.BackupPhase) *v1.Backup {
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "velero"},
		Status:     v1.BackupStatus{Phase: phase},
	}
	if schedule != "" {
		b.Labels = map[string]string{v1.ScheduleNameLabel: schedule}
	}
	return b
}

func TestRestoreCreateBuildsSpecFromFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantName   string
		wantSpec   v1.RestoreSpec
		wantLabels map[string]string
	}{
		{
			name:     "only the backup, named after it and the time",
			args:     []string{"--from-backup", "web"},
			wantName: "web-20260301120000",
			wantSpec: v1.RestoreSpec{BackupName: "web"},
		},
		{
			name:     "explicit name",
			args:     []string{"again", "--from-backup", "web"},
			wantName: "again",
			wantSpec: v1.RestoreSpec{BackupName: "web"},
		},
		{
			name:     "from a schedule",
			args:     []string{"--from-schedule", "nightly"},
			wantName: "nightly-20260301120000",
			wantSpec: v1.RestoreSpec{ScheduleName: "nightly"},
		},
		{
			name: "namespace mappings, in one flag or several",
			args: []string{"--from-backup", "web", "--namespace-mappings", "shop:shop-copy,blog:blog-2",
				"--namespace-mappings", "wiki:wiki-old"},
			wantName: "web-20260301120000",
			wantSpec: v1.RestoreSpec{BackupName: "web", NamespaceMapping: map[string]string{
				"shop": "shop-copy", "blog": "blog-2", "wiki": "wiki-old",
			}},
		},
		{
			name: "filters",
			args: []string{"r", "--from-backup", "web", "--include-namespaces", "shop,blog", "--exclude-namespaces=kube-system",
				"--include-resources", "deployments,configmaps", "--exclude-resources", "secrets"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{
				BackupName:         "web",
				IncludedNamespaces: []string{"shop", "blog"},
				ExcludedNamespaces: []string{"kube-system"},
				IncludedResources:  []string{"deployments", "configmaps"},
				ExcludedResources:  []string{"secrets"},
			},
		},
		{
			name:     "bare optional bools mean true",
			args:     []string{"r", "--from-backup", "web", "--include-cluster-resources", "--restore-volumes", "--preserve-nodeports"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", IncludeClusterResources: ptr.To(true),
				RestorePVs: ptr.To(true), PreserveNodePorts: ptr.To(true)},
		},
		{
			name:     "explicit false is kept",
			args:     []string{"r", "--from-backup", "web", "--include-cluster-resources=false", "--restore-volumes=false", "--preserve-nodeports=false"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", IncludeClusterResources: ptr.To(false),
				RestorePVs: ptr.To(false), PreserveNodePorts: ptr.To(false)},
		},
		{
			name:     "existing resource policy update",
			args:     []string{"r", "--from-backup", "web", "--existing-resource-policy", "update"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", ExistingResourcePolicy: v1.PolicyTypeUpdate},
		},
		{
			name:     "existing resource policy none",
			args:     []string{"r", "--from-backup", "web", "--existing-resource-policy=none"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", ExistingResourcePolicy: v1.PolicyTypeNone},
		},
		{
			name:     "label selector",
			args:     []string{"r", "--from-backup", "web", "-l", "app=web"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		},
		{
			name:     "or selector",
			args:     []string{"r", "--from-backup", "web", "--or-selector", "app=a or tier=db"},
			wantName: "r",
			wantSpec: v1.RestoreSpec{BackupName: "web", OrLabelSelectors: []*metav1.LabelSelector{
				{MatchLabels: map[string]string{"app": "a"}},
				{MatchLabels: map[string]string{"tier": "db"}},
			}},
		},
		{
			name:       "labels",
			args:       []string{"r", "--from-backup", "web", "--labels", "team=ops,env=prod"},
			wantName:   "r",
			wantSpec:   v1.RestoreSpec{BackupName: "web"},
			wantLabels: map[string]string{"team": "ops", "env": "prod"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t,
				restorableBackup("web", "", v1.BackupPhaseCompleted),
				restorableBackup("nightly-1", "nightly", v1.BackupPhaseCompleted),
			).Build()
			out, _, err := run(t, newTestFactory(c), append([]string{"restore", "create"}, tt.args...)...)
			if err != nil {
				t.Fatalf("restore create: %v", err)
			}
			wantOut := `Restore request "` + tt.wantName + `" submitted successfully.` + "\n" +
				"Run `lifeboat restore describe " + tt.wantName + "` or `lifeboat restore logs " + tt.wantName + "` for more details.\n"
			if out != wantOut {
				t.Errorf("output:\n%s\nwant:\n%s", out, wantOut)
			}
			got := &v1.Restore{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: tt.wantName}, got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got.Spec, tt.wantSpec) {
				gotJSON, _ := json.Marshal(got.Spec)
				wantJSON, _ := json.Marshal(tt.wantSpec)
				t.Errorf("spec:\n got %s\nwant %s", gotJSON, wantJSON)
			}
			if !equality.Semantic.DeepEqual(got.Labels, tt.wantLabels) {
				t.Errorf("labels = %v, want %v", got.Labels, tt.wantLabels)
			}
		})
	}
}

func TestRestoreCreatePrintsWithoutCluster(t *testing.T) {
	// No client at all: -o must not touch the cluster.
	out, _, err := run(t, newTestFactory(nil), "restore", "create", "--from-backup", "web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var printed map[string]any
	if err := json.Unmarshal([]byte(out), &printed); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if printed["apiVersion"] != "velero.io/v1" || printed["kind"] != "Restore" {
		t.Errorf("apiVersion/kind = %v/%v, want velero.io/v1/Restore", printed["apiVersion"], printed["kind"])
	}
	if name := printed["metadata"].(map[string]any)["name"]; name != "web-20260301120000" {
		t.Errorf("name = %v, want web-20260301120000", name)
	}
	spec := printed["spec"].(map[string]any)
	for _, field := range []string{"includeClusterResources", "restorePVs", "preserveNodePorts", "existingResourcePolicy", "namespaceMapping"} {
		if v, ok := spec[field]; ok {
			t.Errorf("spec.%s = %v, want it absent when the flag is not given", field, v)
		}
	}
}

func TestRestoreCreateRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "--from-backup"},
		{[]string{"--from-backup", "web", "--from-schedule", "nightly"}, "--from-backup and --from-schedule"},
		{[]string{"--from-backup", "web", "--namespace-mappings", "shop"}, `--namespace-mappings entry "shop"`},
		{[]string{"--from-backup", "web", "--namespace-mappings", "shop:"}, "--namespace-mappings"},
		{[]string{"--from-backup", "web", "--namespace-mappings", ":shop"}, "--namespace-mappings"},
		{[]string{"--from-backup", "web", "--namespace-mappings", "a:b:c"}, "--namespace-mappings"},
		{[]string{"--from-backup", "web", "--namespace-mappings", "Shop:copy"}, `"Shop" is not a valid namespace name`},
		{[]string{"--from-backup", "web", "--namespace-mappings", "a:b,a:c"}, `namespace "a" is mapped to both "b" and "c"`},
		{[]string{"--from-backup", "web", "--namespace-mappings", "a:x,b:x"}, `namespaces "a" and "b" are both mapped to "x"`},
		{[]string{"--from-backup", "web", "--existing-resource-policy", "merge"}, `--existing-resource-policy "merge"`},
		{[]string{"--from-backup", "web", "--restore-volumes=maybe"}, "restore-volumes"},
		{[]string{"--from-backup", "web", "--preserve-nodeports=perhaps"}, "preserve-nodeports"},
		{[]string{"--from-backup", "web", "--include-cluster-resources=sometimes"}, "include-cluster-resources"},
		{[]string{"--from-backup", "web", "--selector", "app in (web"}, "--selector"},
		{[]string{"--from-backup", "web", "--or-selector", "app=a or "}, "--or-selector"},
		{[]string{"--from-backup", "web", "-l", "a=b", "--or-selector", "c=d"}, "--selector and --or-selector"},
		{[]string{"--from-backup", "web", "-o", "table"}, "--output"},
		{[]string{"one", "two", "--from-backup", "web"}, "at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).Build()
			_, _, err := run(t, newTestFactory(c), append([]string{"restore", "create"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one naming %q", err, tt.want)
			}
			assertNoRestores(t, c)
		})
	}
}

func TestRestoreCreateChecksTheSource(t *testing.T) {
	tests := []struct {
		name    string
		backups []client.Object
		args    []string
		want    []string
	}{
		{
			name: "missing backup",
			args: []string{"--from-backup", "nope"},
			want: []string{`backup "nope" not found in namespace "velero"`, "lifeboat backup get"},
		},
		{
			name:    "backup still running",
			backups: []client.Object{restorableBackup("web", "", v1.BackupPhaseInProgress)},
			args:    []string{"--from-backup", "web"},
			want:    []string{`backup "web" is still running`, "lifeboat backup describe web"},
		},
		{
			name:    "failed backup",
			backups: []client.Object{restorableBackup("web", "", v1.BackupPhaseFailed)},
			args:    []string{"--from-backup", "web"},
			want:    []string{`backup "web" is in phase Failed`, "Completed or PartiallyFailed"},
		},
		{
			name:    "schedule without a completed backup",
			backups: []client.Object{restorableBackup("nightly-1", "nightly", v1.BackupPhaseFailed)},
			args:    []string{"--from-schedule", "nightly"},
			want:    []string{`schedule "nightly" has no Completed backup`, "lifeboat backup get"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, tt.backups...).Build()
			_, _, err := run(t, newTestFactory(c), append([]string{"restore", "create", "r"}, tt.args...)...)
			if err == nil {
				t.Fatal("restore create succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			assertNoRestores(t, c)
		})
	}
}

func TestRestoreCreatePartiallyFailedBackupIsRestorable(t *testing.T) {
	c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhasePartiallyFailed)).Build()
	if _, _, err := run(t, newTestFactory(c), "restore", "create", "r", "--from-backup", "web"); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreCreateExistingName(t *testing.T) {
	existing := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "velero"}}
	c := newFakeBuilder(t, existing, restorableBackup("web", "", v1.BackupPhaseCompleted)).Build()
	_, _, err := run(t, newTestFactory(c), "restore", "create", "r", "--from-backup", "web")
	if err == nil || !strings.Contains(err.Error(), `restore "r" already exists`) {
		t.Errorf("error = %v, want it to say the restore exists", err)
	}
}

func assertNoRestores(t *testing.T, c client.Client) {
	t.Helper()
	list := &v1.RestoreList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, rs := range list.Items {
		t.Errorf("restore %s was created", rs.Name)
	}
}

// progressingRestores makes each read of a restore see the next status in
// steps, the way a server moves a restore along.
func progressingRestores(steps []v1.RestoreStatus) interceptor.Funcs {
	reads := 0
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if rs, ok := obj.(*v1.Restore); ok {
				rs.Status = steps[min(reads, len(steps)-1)]
				reads++
			}
			return nil
		},
	}
}

func TestRestoreCreateWait(t *testing.T) {
	steps := []v1.RestoreStatus{
		{},
		{Phase: v1.RestorePhaseInProgress, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 12}},
		{Phase: v1.RestorePhaseInProgress, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 30}},
		{Phase: v1.RestorePhaseCompleted, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 40}, Warnings: 2},
	}
	c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).
		WithInterceptorFuncs(progressingRestores(steps)).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "create", "r", "--from-backup", "web", "--wait")
	if err != nil {
		t.Fatalf("restore create --wait: %v\n%s", err, out)
	}
	want := "Restore request \"r\" submitted successfully.\n" +
		"Waiting for the restore to finish...\n" +
		"Restore r: New\nRestore r: InProgress\nRestore r: Completed\n" +
		"Restore r completed: 40 items restored, 2 warnings, 0 errors.\n" +
		"Run `lifeboat restore describe r --details` to see the warnings.\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestRestoreCreateWaitOnTerminal(t *testing.T) {
	steps := []v1.RestoreStatus{
		{Phase: v1.RestorePhaseInProgress, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 12}},
		{Phase: v1.RestorePhaseInProgress, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 12}},
		{Phase: v1.RestorePhaseCompleted, Progress: &v1.RestoreProgress{TotalItems: 40, ItemsRestored: 40}},
	}
	c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).
		WithInterceptorFuncs(progressingRestores(steps)).Build()
	f := newTestFactory(c)
	f.IsTerminal = func(io.Writer) bool { return true }
	out, _, err := run(t, f, "restore", "create", "r", "--from-backup", "web", "--wait")
	if err != nil {
		t.Fatal(err)
	}
	want := "\r\033[KRestore r: InProgress, items restored 12/40" +
		"\r\033[KRestore r: Completed, items restored 40/40\n" +
		"Restore r completed: 40 items restored, 0 warnings, 0 errors.\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output:\n%q\nwant it to end with:\n%q", out, want)
	}
}

func TestRestoreCreateWaitFailures(t *testing.T) {
	tests := []struct {
		name   string
		status v1.RestoreStatus
		want   []string
	}{
		{
			name:   "failed",
			status: v1.RestoreStatus{Phase: v1.RestorePhaseFailed, FailureReason: `archive entry "../etc/passwd" is outside resources/`},
			want:   []string{`restore "r" failed`, "../etc/passwd", "lifeboat restore logs r", "lifeboat restore describe r"},
		},
		{
			name: "failed validation",
			status: v1.RestoreStatus{Phase: v1.RestorePhaseFailedValidation,
				ValidationErrors: []string{`spec.backupName: backup "web" is in phase InProgress`, "spec.resourceModifier: not supported"}},
			want: []string{"failed validation", `spec.backupName: backup "web" is in phase InProgress`, "spec.resourceModifier: not supported", "lifeboat restore describe r"},
		},
		{
			name:   "partially failed",
			status: v1.RestoreStatus{Phase: v1.RestorePhasePartiallyFailed, Errors: 3, Warnings: 1, Progress: &v1.RestoreProgress{TotalItems: 10, ItemsRestored: 7}},
			want:   []string{"partially failed", "3 errors", "7 items restored", "lifeboat restore describe r --details", "lifeboat restore logs r"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).
				WithInterceptorFuncs(progressingRestores([]v1.RestoreStatus{tt.status})).Build()
			_, _, err := run(t, newTestFactory(c), "restore", "create", "r", "--from-backup", "web", "--wait")
			if err == nil {
				t.Fatal("--wait returned success for an unsuccessful restore")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRestoreCreateWaitInterrupted(t *testing.T) {
	c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).
		WithInterceptorFuncs(progressingRestores([]v1.RestoreStatus{{Phase: v1.RestorePhaseInProgress}})).Build()
	f := newTestFactory(c)
	f.PollInterval = time.Hour
	cmd := newRootCommand(f)
	cmd.SetOut(io.Discard)
	cmd.SetArgs([]string{"restore", "create", "r", "--from-backup", "web", "--wait"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "goes on in the server") || !strings.Contains(err.Error(), "lifeboat restore describe r") {
		t.Errorf("error = %v, want it to say the restore goes on and how to follow it", err)
	}
}

// With Velero's Restore CRD, spec.dryRun is pruned and the server would
// restore for real: `restore create --dry-run` finds out with a dry-run
// create of the Restore and creates nothing.
func TestRestoreCreateDryRunRefusesACRDThatDropsIt(t *testing.T) {
	prunesDryRun := interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if rs, ok := obj.(*v1.Restore); ok {
				rs.Spec.DryRun = false // as Velero's structural schema prunes it
			}
			return c.Create(ctx, obj, opts...)
		},
	}
	c := newFakeBuilder(t, restorableBackup("web", "", v1.BackupPhaseCompleted)).WithInterceptorFuncs(prunesDryRun).Build()
	f := newTestFactory(c)
	_, _, err := run(t, f, "restore", "create", "probe", "--from-backup", "web", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "drops spec.dryRun") || !strings.Contains(err.Error(), "lifeboat install --crds-only") {
		t.Fatalf("dry run against a CRD without spec.dryRun: %v", err)
	}
	var list v1.RestoreList
	if err := c.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("restores were created: %v", list.Items)
	}

	// The Restore it would create carries spec.dryRun, under a name that
	// says it is one.
	rs := printed[v1.Restore](t, newTestFactory(nil), "restore", "create", "--from-backup", "web", "--dry-run")
	if !rs.Spec.DryRun || !strings.HasPrefix(rs.Name, "web-dry-run-") {
		t.Errorf("restore create --dry-run -o json: name %q, spec.dryRun %v", rs.Name, rs.Spec.DryRun)
	}
}
