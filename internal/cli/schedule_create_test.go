package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestScheduleCreateBuildsSpecFromFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantSpec   v1.ScheduleSpec
		wantLabels map[string]string
	}{
		{
			name:     "only the schedule",
			args:     []string{"--schedule", "0 3 * * *"},
			wantSpec: v1.ScheduleSpec{Schedule: "0 3 * * *"},
		},
		{
			name: "backup flags make the template, as for backup create",
			args: []string{"--schedule", "@every 6h", "--include-namespaces", "shop,blog", "--exclude-resources=secrets",
				"--include-cluster-resources=false", "--selector", "app=web", "--ttl", "168h", "--storage-location", "default"},
			wantSpec: v1.ScheduleSpec{Schedule: "@every 6h", Template: v1.BackupSpec{
				IncludedNamespaces:      []string{"shop", "blog"},
				ExcludedResources:       []string{"secrets"},
				IncludeClusterResources: ptr.To(false),
				LabelSelector:           &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TTL:                     metav1.Duration{Duration: 168 * time.Hour},
				StorageLocation:         "default",
			}},
		},
		{
			name: "schedule flags",
			args: []string{"--schedule", "@daily", "--paused", "--skip-immediately", "--use-owner-references-in-backup"},
			wantSpec: v1.ScheduleSpec{Schedule: "@daily", Paused: true,
				SkipImmediately: ptr.To(true), UseOwnerReferencesInBackup: ptr.To(true)},
		},
		{
			name:     "explicit false is kept",
			args:     []string{"--schedule", "@daily", "--skip-immediately=false", "--use-owner-references-in-backup=false"},
			wantSpec: v1.ScheduleSpec{Schedule: "@daily", SkipImmediately: ptr.To(false), UseOwnerReferencesInBackup: ptr.To(false)},
		},
		{
			name:       "labels go on the schedule, which passes them to its backups",
			args:       []string{"--schedule", "@daily", "--labels", "team=ops"},
			wantSpec:   v1.ScheduleSpec{Schedule: "@daily"},
			wantLabels: map[string]string{"team": "ops"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, location("default")).Build()
			out, _, err := run(t, newTestFactory(c), append([]string{"schedule", "create", "nightly"}, tt.args...)...)
			if err != nil {
				t.Fatalf("schedule create: %v", err)
			}
			if !strings.Contains(out, `Schedule "nightly" created successfully.`) {
				t.Errorf("output does not confirm the schedule:\n%s", out)
			}
			got := &v1.Schedule{}
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

func TestScheduleCreateSaysWhenTheFirstBackupComes(t *testing.T) {
	for _, tt := range []struct {
		flag, want string
	}{
		{"--schedule=@daily", "Its first backup starts now"},
		{"--paused", "lifeboat schedule unpause nightly"},
		{"--skip-immediately", "when the schedule next fires"},
	} {
		c := newFakeBuilder(t).Build()
		out, _, err := run(t, newTestFactory(c), "schedule", "create", "nightly", "--schedule", "@daily", tt.flag)
		if err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: err %v, output %q; want it to contain %q", tt.flag, err, out, tt.want)
		}
	}
}

func TestScheduleCreateRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"--schedule is required", `"0 3 * * *"`}},
		{[]string{"--schedule", "every night"}, []string{"invalid --schedule", `"every night"`, `"0 3 * * *"`}},
		{[]string{"--schedule", "0 3 * * * *"}, []string{"invalid --schedule", "five fields"}},
		{[]string{"--schedule", "@every never"}, []string{"invalid --schedule"}},
		{[]string{"--schedule", "@daily", "--ttl", "-1h"}, []string{"--ttl"}},
		{[]string{"--schedule", "@daily", "--selector", "a=b", "--or-selector", "c=d"}, []string{"--selector and --or-selector"}},
		{[]string{"--schedule", "@daily", "--paused=maybe"}, []string{"paused"}},
		{[]string{"--schedule", "@daily", "-o", "table"}, []string{"--output"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := newFakeBuilder(t).Build()
			_, _, err := run(t, newTestFactory(c), append([]string{"schedule", "create", "s"}, tt.args...)...)
			if err == nil {
				t.Fatal("schedule create succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "s"}, &v1.Schedule{}); err == nil {
				t.Error("a schedule was created despite the bad flag")
			}
		})
	}
}

func TestScheduleCreateChecksLocationAndName(t *testing.T) {
	existing := &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "velero"}}
	c := newFakeBuilder(t, location("default"), existing).Build()
	_, _, err := run(t, newTestFactory(c), "schedule", "create", "s", "--schedule", "@daily")
	if err == nil || !strings.Contains(err.Error(), `schedule "s" already exists`) {
		t.Errorf("error = %v, want it to say the schedule exists", err)
	}
	_, _, err = run(t, newTestFactory(c), "schedule", "create", "t", "--schedule", "@daily", "--storage-location", "dflt")
	if err == nil || !strings.Contains(err.Error(), `"dflt" not found`) || !strings.Contains(err.Error(), "existing locations: default") {
		t.Errorf("error = %v, want it to name the missing location and the existing one", err)
	}
}

func TestScheduleCreatePrintsInsteadOfCreating(t *testing.T) {
	c := newFakeBuilder(t).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "create", "s", "--schedule", "0 3 * * *", "--include-namespaces", "shop", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var printed v1.Schedule
	if err := yaml.Unmarshal([]byte(out), &printed); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, out)
	}
	if printed.APIVersion != "velero.io/v1" || printed.Kind != "Schedule" || printed.Spec.Schedule != "0 3 * * *" ||
		len(printed.Spec.Template.IncludedNamespaces) != 1 {
		t.Errorf("printed %s/%s %+v", printed.APIVersion, printed.Kind, printed.Spec)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "s"}, &v1.Schedule{}); err == nil {
		t.Error("-o created the schedule")
	}
}
