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

func TestBackupCreateBuildsSpecFromFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantSpec   v1.BackupSpec
		wantLabels map[string]string
	}{
		{
			name:     "no flags leaves everything to the server",
			wantSpec: v1.BackupSpec{},
		},
		{
			name: "namespace and resource filters",
			args: []string{"--include-namespaces", "shop,blog", "--exclude-namespaces", "kube-system",
				"--include-resources", "deployments,configmaps", "--exclude-resources=secrets"},
			wantSpec: v1.BackupSpec{
				IncludedNamespaces: []string{"shop", "blog"},
				ExcludedNamespaces: []string{"kube-system"},
				IncludedResources:  []string{"deployments", "configmaps"},
				ExcludedResources:  []string{"secrets"},
			},
		},
		{
			name:     "bare --include-cluster-resources means true",
			args:     []string{"--include-cluster-resources"},
			wantSpec: v1.BackupSpec{IncludeClusterResources: ptr.To(true)},
		},
		{
			name:     "explicit false is kept",
			args:     []string{"--include-cluster-resources=false", "--snapshot-volumes=false"},
			wantSpec: v1.BackupSpec{IncludeClusterResources: ptr.To(false), SnapshotVolumes: ptr.To(false)},
		},
		{
			name: "label selector",
			args: []string{"--selector", "app=web,tier in (front,back)"},
			wantSpec: v1.BackupSpec{LabelSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"app": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"back", "front"}},
				},
			}},
		},
		{
			name: "or selector",
			args: []string{"--or-selector", "app=a or tier=db,env=prod"},
			wantSpec: v1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{
				{MatchLabels: map[string]string{"app": "a"}},
				{MatchLabels: map[string]string{"tier": "db", "env": "prod"}},
			}},
		},
		{
			name:     "ttl",
			args:     []string{"--ttl", "36h"},
			wantSpec: v1.BackupSpec{TTL: metav1.Duration{Duration: 36 * time.Hour}},
		},
		{
			name:       "storage location is labelled like Velero does",
			args:       []string{"--storage-location", "default", "--labels", "team=ops,env=prod"},
			wantSpec:   v1.BackupSpec{StorageLocation: "default"},
			wantLabels: map[string]string{"team": "ops", "env": "prod", v1.StorageLocationLabel: "default"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, location("default")).Build()
			f := newTestFactory(c)
			out, _, err := run(t, f, append([]string{"backup", "create", "nightly"}, tt.args...)...)
			if err != nil {
				t.Fatalf("backup create: %v", err)
			}
			if !strings.Contains(out, `Backup request "nightly" submitted successfully.`) {
				t.Errorf("output does not confirm the backup:\n%s", out)
			}
			got := &v1.Backup{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "nightly"}, got); err != nil {
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

func TestBackupCreateLeavesOptionalBoolsNil(t *testing.T) {
	f := newTestFactory(nil)
	out, _, err := run(t, f, "backup", "create", "b", "--include-namespaces", "shop", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var printed map[string]any
	if err := json.Unmarshal([]byte(out), &printed); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	spec := printed["spec"].(map[string]any)
	for _, field := range []string{"includeClusterResources", "snapshotVolumes"} {
		if v, ok := spec[field]; ok {
			t.Errorf("spec.%s = %v, want it absent when the flag is not given", field, v)
		}
	}
	if printed["apiVersion"] != "velero.io/v1" || printed["kind"] != "Backup" {
		t.Errorf("apiVersion/kind = %v/%v, want velero.io/v1/Backup", printed["apiVersion"], printed["kind"])
	}
}

func TestBackupCreateRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "forever"}, "--ttl"},
		{[]string{"--ttl", "-1h"}, "--ttl"},
		{[]string{"--selector", "app in (web"}, "--selector"},
		{[]string{"--or-selector", "app=a or "}, "--or-selector"},
		{[]string{"--or-selector", "a=b or c in (d"}, "--or-selector"},
		{[]string{"--include-cluster-resources=maybe"}, "include-cluster-resources"},
		{[]string{"--selector", "a=b", "--or-selector", "c=d"}, "--selector and --or-selector"},
		{[]string{"-o", "table"}, "--output"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := newFakeBuilder(t).Build()
			_, _, err := run(t, newTestFactory(c), append([]string{"backup", "create", "b"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one naming %q", err, tt.want)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "b"}, &v1.Backup{}); err == nil {
				t.Error("a backup was created despite the bad flag")
			}
		})
	}
}

func TestBackupCreateUnknownStorageLocation(t *testing.T) {
	c := newFakeBuilder(t, location("default"), location("offsite")).Build()
	_, _, err := run(t, newTestFactory(c), "backup", "create", "b", "--storage-location", "ofsite")
	if err == nil {
		t.Fatal("backup create with a missing location succeeded")
	}
	for _, want := range []string{`"ofsite" not found`, "existing locations: default, offsite"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	empty := newFakeBuilder(t).Build()
	_, _, err = run(t, newTestFactory(empty), "backup", "create", "b", "--storage-location", "x")
	if err == nil || !strings.Contains(err.Error(), `"x" not found`) || !strings.Contains(err.Error(), "lifeboat install") {
		t.Errorf("error with no locations at all = %v, want it to name x and suggest lifeboat install", err)
	}
}

func TestBackupCreateExistingName(t *testing.T) {
	existing := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "velero"}}
	c := newFakeBuilder(t, existing).Build()
	_, _, err := run(t, newTestFactory(c), "backup", "create", "b")
	if err == nil || !strings.Contains(err.Error(), `backup "b" already exists`) {
		t.Errorf("error = %v, want it to say the backup exists", err)
	}
}

// progressingBackups makes each read of a backup see the next status in
// steps, the way a server moves a backup along.
func progressingBackups(steps []v1.BackupStatus) interceptor.Funcs {
	reads := 0
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if b, ok := obj.(*v1.Backup); ok {
				b.Status = steps[min(reads, len(steps)-1)]
				reads++
			}
			return nil
		},
	}
}

func TestBackupCreateWait(t *testing.T) {
	steps := []v1.BackupStatus{
		{},
		{Phase: v1.BackupPhaseInProgress, Progress: &v1.BackupProgress{TotalItems: 10, ItemsBackedUp: 3}},
		{Phase: v1.BackupPhaseInProgress, Progress: &v1.BackupProgress{TotalItems: 10, ItemsBackedUp: 7}},
		{Phase: v1.BackupPhaseCompleted, Progress: &v1.BackupProgress{TotalItems: 10, ItemsBackedUp: 10}, Warnings: 1},
	}
	c := newFakeBuilder(t).WithInterceptorFuncs(progressingBackups(steps)).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "create", "b", "--wait")
	if err != nil {
		t.Fatalf("backup create --wait: %v\n%s", err, out)
	}
	// Not a terminal: one line per phase, no carriage returns.
	want := "Backup b: New\nBackup b: InProgress\nBackup b: Completed\nBackup b completed: 10 items, 1 warnings, 0 errors.\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output:\n%s\nwant it to end with:\n%s", out, want)
	}
	if strings.Contains(out, "\r") {
		t.Errorf("progress line rewriting used outside a terminal:\n%q", out)
	}
}

func TestBackupCreateWaitOnTerminal(t *testing.T) {
	steps := []v1.BackupStatus{
		{Phase: v1.BackupPhaseInProgress, Progress: &v1.BackupProgress{TotalItems: 5000, ItemsBackedUp: 1234}},
		{Phase: v1.BackupPhaseInProgress, Progress: &v1.BackupProgress{TotalItems: 5000, ItemsBackedUp: 1234}},
		{Phase: v1.BackupPhaseCompleted, Progress: &v1.BackupProgress{TotalItems: 5000, ItemsBackedUp: 5000}},
	}
	c := newFakeBuilder(t).WithInterceptorFuncs(progressingBackups(steps)).Build()
	f := newTestFactory(c)
	f.IsTerminal = func(io.Writer) bool { return true }
	out, _, err := run(t, f, "backup", "create", "b", "--wait")
	if err != nil {
		t.Fatal(err)
	}
	// The line is redrawn only when it changes, and ends with a newline
	// before the summary.
	want := "\r\033[KBackup b: InProgress, items 1234/5000" +
		"\r\033[KBackup b: Completed, items 5000/5000\n" +
		"Backup b completed: 5000 items, 0 warnings, 0 errors.\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output:\n%q\nwant it to end with:\n%q", out, want)
	}
}

func TestBackupCreateWaitFailures(t *testing.T) {
	tests := []struct {
		name   string
		status v1.BackupStatus
		want   []string
	}{
		{
			name:   "failed",
			status: v1.BackupStatus{Phase: v1.BackupPhaseFailed, FailureReason: "upload failed: disk full"},
			want:   []string{`backup "b" failed`, "disk full"},
		},
		{
			name: "failed validation",
			status: v1.BackupStatus{Phase: v1.BackupPhaseFailedValidation,
				ValidationErrors: []string{"spec.orderedResources is not supported", "spec.datamover is not supported"}},
			want: []string{"failed validation", "spec.orderedResources is not supported", "spec.datamover is not supported"},
		},
		{
			name:   "partially failed",
			status: v1.BackupStatus{Phase: v1.BackupPhasePartiallyFailed, Errors: 2},
			want:   []string{"partially failed", "2 errors"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t).WithInterceptorFuncs(progressingBackups([]v1.BackupStatus{tt.status})).Build()
			_, _, err := run(t, newTestFactory(c), "backup", "create", "b", "--wait")
			if err == nil {
				t.Fatal("--wait returned success for an unsuccessful backup")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: v1.BackupStatus{
		Phase: v1.BackupPhaseInProgress, Progress: &v1.BackupProgress{TotalItems: 5000, ItemsBackedUp: 1234}}}
	if got, want := progressLine(b), "Backup b: InProgress, items 1234/5000"; got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
}
