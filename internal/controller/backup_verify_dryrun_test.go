package controller

import (
	"maps"
	"strings"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestParseVerifyMapping(t *testing.T) {
	if m, err := parseVerifyMapping("true"); err != nil || m != nil {
		t.Errorf(`"true": %v %v`, m, err)
	}
	m, err := parseVerifyMapping("shop:shop-check, db:db-check")
	if err != nil || !maps.Equal(m, map[string]string{"shop": "shop-check", "db": "db-check"}) {
		t.Errorf("mapping: %v %v", m, err)
	}
	for _, bad := range []string{"", "yes", "shop", "shop:", "Shop:x", "a:b,a:c", "a:b/c"} {
		if _, err := parseVerifyMapping(bad); err == nil || !strings.Contains(err.Error(), v1.VerifyDryRunAnnotation) {
			t.Errorf("%q: %v, want an error naming the annotation", bad, err)
		}
	}
}

func TestWithDryRun(t *testing.T) {
	rs := &v1.Restore{}
	rs.Name = "b-verify-1"
	rs.Status.Phase = v1.RestorePhasePartiallyFailed
	rs.Status.DryRun = &v1.RestoreDryRun{WouldCreate: 3, WouldFail: 1, Items: []v1.RestoreDryRunItem{
		{Resource: "secrets", Namespace: "ns", Name: "s", Outcome: v1.DryRunSkip},
		{Resource: "configmaps", Namespace: "ns", Name: "c", Outcome: v1.DryRunFail, Message: "exceeded quota"},
	}}
	reason, summary := withDryRun(v1.VerificationVerified, "all files match", rs)
	if reason != v1.VerificationRestoreWouldFail || !strings.Contains(summary, "first: configmaps ns/c: exceeded quota") || !strings.HasPrefix(summary, "all files match; ") {
		t.Errorf("%s: %s", reason, summary)
	}
	rs.Status.DryRun = &v1.RestoreDryRun{WouldCreate: 3}
	rs.Status.Phase = v1.RestorePhaseCompleted
	if reason, _ := withDryRun(v1.VerificationNoDigests, "no digests", rs); reason != v1.VerificationNoDigests {
		t.Errorf("a clean dry run changed the reason to %s", reason)
	}
	rs.Status = v1.RestoreStatus{Phase: v1.RestorePhaseFailed, FailureReason: "storage location gone"}
	if reason, summary := withDryRun(v1.VerificationVerified, "ok", rs); reason != v1.VerificationRestoreWouldFail || !strings.Contains(summary, "storage location gone") {
		t.Errorf("failed dry run: %s: %s", reason, summary)
	}
}
