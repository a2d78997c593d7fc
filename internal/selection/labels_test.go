package selection

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestLabelMatcher(t *testing.T) {
	match := func(kv ...string) *metav1.LabelSelector {
		ls := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			ls.MatchLabels[kv[i]] = kv[i+1]
		}
		return ls
	}
	type check struct {
		labels map[string]string
		want   bool
	}
	tests := []struct {
		name         string
		spec         *v1.BackupSpec
		checks       []check
		wantSelector string // "-" when there is no single selector
	}{
		{
			name:         "nil spec selects everything",
			spec:         nil,
			checks:       []check{{nil, true}, {map[string]string{"a": "b"}, true}},
			wantSelector: "",
		},
		{
			name:         "no selector selects everything",
			spec:         &v1.BackupSpec{},
			checks:       []check{{nil, true}},
			wantSelector: "",
		},
		{
			name: "labelSelector",
			spec: &v1.BackupSpec{LabelSelector: match("app", "web")},
			checks: []check{
				{map[string]string{"app": "web", "tier": "x"}, true},
				{map[string]string{"app": "db"}, false},
				{nil, false},
			},
			wantSelector: "app=web",
		},
		{
			name: "labelSelector with expressions",
			spec: &v1.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}},
			}}},
			checks:       []check{{map[string]string{"env": "prod"}, true}, {map[string]string{"env": "dev"}, false}, {nil, true}},
			wantSelector: "env notin (dev)",
		},
		{
			name: "orLabelSelectors match any",
			spec: &v1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{match("a1", "b1"), match("a2", "b2")}},
			checks: []check{
				{map[string]string{"a1": "b1"}, true},
				{map[string]string{"a2": "b2"}, true},
				{map[string]string{"a1": "b2"}, false},
			},
			wantSelector: "-",
		},
		{
			name:         "a single or-selector is a plain selector",
			spec:         &v1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{match("a1", "b1")}},
			checks:       []check{{map[string]string{"a1": "b1"}, true}, {nil, false}},
			wantSelector: "a1=b1",
		},
		{
			name:         "an empty or-list selects everything",
			spec:         &v1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{}},
			checks:       []check{{nil, true}},
			wantSelector: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewLabelMatcher(tc.spec)
			if err != nil {
				t.Fatalf("NewLabelMatcher: %v", err)
			}
			for _, c := range tc.checks {
				if got := m.Matches(c.labels); got != c.want {
					t.Errorf("Matches(%v) = %v, want %v", c.labels, got, c.want)
				}
			}
			sel, ok := m.Selector()
			got := "-"
			if ok {
				got = sel.String()
			}
			if got != tc.wantSelector {
				t.Errorf("Selector() = %q, want %q", got, tc.wantSelector)
			}
		})
	}
}

func TestLabelMatcherRefusesBadSpecs(t *testing.T) {
	valid := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}
	tests := []struct {
		name       string
		spec       *v1.BackupSpec
		wantFields []string
	}{
		{
			name:       "both selectors",
			spec:       &v1.BackupSpec{LabelSelector: valid, OrLabelSelectors: []*metav1.LabelSelector{valid}},
			wantFields: []string{"spec.labelSelector", "spec.orLabelSelectors"},
		},
		{
			// Velero refuses a non-nil or-list next to a label selector, even
			// an empty one.
			name:       "both selectors, or-list empty",
			spec:       &v1.BackupSpec{LabelSelector: valid, OrLabelSelectors: []*metav1.LabelSelector{}},
			wantFields: []string{"spec.labelSelector", "spec.orLabelSelectors"},
		},
		{
			name:       "invalid labelSelector",
			spec:       &v1.BackupSpec{LabelSelector: invalid},
			wantFields: []string{"spec.labelSelector"},
		},
		{
			name:       "invalid and null or-selectors",
			spec:       &v1.BackupSpec{OrLabelSelectors: []*metav1.LabelSelector{valid, invalid, nil}},
			wantFields: []string{"spec.orLabelSelectors[1]", "spec.orLabelSelectors[2]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewLabelMatcher(tc.spec)
			if err == nil {
				t.Fatalf("NewLabelMatcher succeeded: %+v", m)
			}
			for _, f := range tc.wantFields {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

func TestExcludedFromBackup(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{ExcludeFromBackupLabel: "true"}, true},
		{map[string]string{ExcludeFromBackupLabel: "false"}, false},
		{map[string]string{ExcludeFromBackupLabel: "1"}, false},
		{map[string]string{ExcludeFromBackupLabel: ""}, false},
		{nil, false},
	}
	for _, tc := range tests {
		if got := ExcludedFromBackup(tc.labels); got != tc.want {
			t.Errorf("ExcludedFromBackup(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}
