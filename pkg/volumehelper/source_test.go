package volumehelper

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// sourceCase is one volume of world() (obj) or one pod volume (pod, vol)
// with the decision the helper must take and the source it must name.
type sourceCase struct {
	name   string
	config decisionCase
	obj    string // a fixture for findObj; "" for a pod volume
	pod    *corev1.Pod
	vol    corev1.Volume

	action policy.ActionType
	source Source
	rule   int
	// reason is a substring of Decision.Reason; "" means it must be empty.
	reason string
	// via is the pod volume a claim is copied through (SourcePodVolume).
	via *PodVolume
}

func sourceCases() []sourceCase {
	snapshotEmptyDir := "version: v1\nvolumePolicies:\n- conditions: {volumeTypes: [emptyDir]}\n  action: {type: snapshot}\n"
	goldOnly := "version: v1\nvolumePolicies:\n- conditions: {storageClass: [gold]}\n  action: {type: snapshot}\n"
	mixed := decisionCase{policy: mixedPolicy}
	optIn := newPod("app", "web", map[string]string{VolumesToBackupAnnotation: "cache, optin"})
	optOut := newPod("app", "web", map[string]string{VolumesToExcludeAnnotation: "cache"})
	plain := newPod("app", "db", nil)
	hostPath := corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}
	return []sourceCase{
		// PersistentVolumes and claims.
		{name: "rule on the claim", config: mixed, obj: "app/gold", action: policy.Snapshot, source: SourceRule, rule: 1},
		{name: "rule on the claim's labels, asked by volume", config: mixed, obj: "pv-vault", action: policy.Custom, source: SourceRule, rule: 4},
		{name: "rule on a pending claim", config: mixed, obj: "app/pending", action: policy.Skip, source: SourceRule, rule: 0},
		{name: "pending claim, no policy", obj: "app/pending", action: policy.Skip, source: SourceUnboundClaim, rule: NoRule,
			reason: "PersistentVolumeClaim app/pending has no volume bound to it (phase Pending): no volume data to back up"},
		{name: "claim bound to a missing volume", config: mixed, obj: "app/dangling", action: policy.Skip, source: SourceUnboundClaim, rule: NoRule,
			reason: "PersistentVolume pv-gone, which does not exist"},
		{name: "claim opted in by its pod", obj: "app/optin", action: policy.FSBackup, source: SourcePodVolume, rule: NoRule,
			reason: "pod app/web copies it by fs-backup",
			via:    &PodVolume{Namespace: "app", Pod: "web", Volume: "optin", Source: SourcePodAnnotation, Rule: NoRule, Reason: "listed in " + VolumesToBackupAnnotation}},
		{name: "claim copied by default, asked by volume", config: decisionCase{defaultFS: true}, obj: "pv-plain", action: policy.FSBackup, source: SourcePodVolume, rule: NoRule,
			reason: "pod app/db copies it by fs-backup",
			via:    &PodVolume{Namespace: "app", Pod: "db", Volume: "data", Source: SourceDefaultVolumesToFsBackup, Rule: NoRule, Reason: "defaultVolumesToFsBackup, not in " + VolumesToExcludeAnnotation}},
		{name: "claim of an ephemeral volume a rule copies", config: mixed, obj: "pv-eph", action: policy.FSBackup, source: SourcePodVolume, rule: NoRule,
			reason: "pod app/eph copies it by fs-backup",
			via:    &PodVolume{Namespace: "app", Pod: "eph", Volume: "scratch", Source: SourceRule, Rule: 7}},
		{name: "claims left out by the filters are not copied through pods", config: decisionCase{defaultFS: true, excludePVC: true}, obj: "app/plain",
			action: policy.Snapshot, source: SourceDefault, rule: NoRule, reason: "snapshotVolumes (unset, so true)"},
		{name: "snapshotVolumes true", config: decisionCase{snapshotVolumes: ptr(true)}, obj: "app/plain", action: policy.Snapshot, source: SourceSnapshotVolumes, rule: NoRule, reason: "snapshotVolumes=true"},
		{name: "snapshotVolumes false", config: decisionCase{policy: mixedPolicy, snapshotVolumes: ptr(false)}, obj: "pv-plain", action: policy.Skip, source: SourceSnapshotVolumes, rule: NoRule, reason: "snapshotVolumes=false"},
		{name: "snapshotVolumes unset", config: mixed, obj: "pv-unclaimed", action: policy.Snapshot, source: SourceDefault, rule: NoRule, reason: "snapshotVolumes (unset, so true)"},

		// Pod volumes.
		{name: "hostPath never copied", config: decisionCase{policy: mixedPolicy, defaultFS: true}, pod: plain, vol: hostPath,
			action: policy.Skip, source: SourceNeverFSBackup, rule: NoRule, reason: "hostPath volumes are never copied"},
		{name: "claim volume left out by the filters", config: decisionCase{defaultFS: true, excludePVC: true}, pod: plain, vol: claimVolume("data", "plain"),
			action: policy.Skip, source: SourceNeverFSBackup, rule: NoRule, reason: "the backup's filters leave claims out"},
		{name: "rule on the pod volume's type", config: mixed, pod: plain, vol: emptyDirVolume("cache"), action: policy.FSBackup, source: SourceRule, rule: 6},
		{name: "rule on the claim of a pod volume", config: mixed, pod: plain, vol: claimVolume("files", "files"), action: policy.FSBackup, source: SourceRule, rule: 2},
		{name: "snapshot rule on a pod volume that is no claim", config: decisionCase{policy: snapshotEmptyDir}, pod: plain, vol: emptyDirVolume("cache"),
			action: policy.Skip, source: SourceRule, rule: 0, reason: "snapshot does not apply to a pod volume"},
		{name: "pod volume whose claim is pending", config: decisionCase{policy: goldOnly, defaultFS: true}, pod: plain, vol: claimVolume("data", "pending"),
			action: policy.Skip, source: SourceUnboundClaim, rule: NoRule, reason: "volume data of pod app/db: PersistentVolumeClaim app/pending has no volume bound"},
		{name: "opted in", pod: optIn, vol: emptyDirVolume("cache"), action: policy.FSBackup, source: SourcePodAnnotation, rule: NoRule, reason: "listed in " + VolumesToBackupAnnotation},
		{name: "opted out", config: decisionCase{defaultFS: true}, pod: optOut, vol: emptyDirVolume("cache"), action: policy.Skip, source: SourcePodAnnotation, rule: NoRule, reason: "listed in " + VolumesToExcludeAnnotation},
		{name: "copied by default", config: decisionCase{policy: goldOnly, defaultFS: true}, pod: optOut, vol: emptyDirVolume("data"),
			action: policy.FSBackup, source: SourceDefaultVolumesToFsBackup, rule: NoRule, reason: "defaultVolumesToFsBackup, not in"},
		{name: "not copied by default", pod: plain, vol: emptyDirVolume("data"), action: policy.Skip, source: SourceDefaultVolumesToFsBackup, rule: NoRule,
			reason: "(defaultVolumesToFsBackup is false)"},
	}
}

// TestDecisionSource: every source is reached, with the rule index, the
// pod volume and the reason that go with it; Explain returns the same
// decision with the policies' verdicts; the Should* answers agree.
func TestDecisionSource(t *testing.T) {
	reached := map[Source]bool{}
	for _, tc := range sourceCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.config.helper(t)
			var d, explained Decision
			var err, explainErr error
			if tc.obj != "" {
				obj := toUnstructured(t, findObj(tc.obj))
				gr := groupResourceOf(findObj(tc.obj))
				d, err = h.DecideVolume(obj, gr)
				explained, explainErr = h.ExplainVolume(obj, gr)
			} else {
				pod := tc.pod.DeepCopy()
				pod.Spec.Volumes = append(pod.Spec.Volumes, tc.vol)
				d, err = h.DecidePodVolume(tc.vol, *pod)
				explained, explainErr = h.ExplainPodVolume(tc.vol, *pod)
			}
			if err != nil || explainErr != nil {
				t.Fatalf("decide: %v, explain: %v", err, explainErr)
			}
			reached[d.Source] = true
			if d.Action != tc.action || d.Source != tc.source || d.Rule != tc.rule {
				t.Errorf("got %s by %s (rule %d), want %s by %s (rule %d); reason %q", d.Action, d.Source, d.Rule, tc.action, tc.source, tc.rule, d.Reason)
			}
			if tc.reason == "" && d.Reason != "" || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q, want one containing %q", d.Reason, tc.reason)
			}
			switch {
			case tc.via == nil && d.Pod != nil:
				t.Errorf("pod volume %+v, want none", *d.Pod)
			case tc.via != nil && (d.Pod == nil || *d.Pod != *tc.via):
				t.Errorf("pod volume %+v, want %+v", d.Pod, *tc.via)
			}
			if d.Match != nil {
				t.Errorf("DecideVolume/DecidePodVolume filled Match: %+v", d.Match)
			}

			// Explain: the same decision, with the verdicts.
			m := explained.Match
			explained.Match = nil
			if explained.Action != d.Action || explained.Source != d.Source || explained.Rule != d.Rule || explained.Reason != d.Reason ||
				!ValuesEqual(explained.Parameters, d.Parameters) || (explained.Pod == nil) != (d.Pod == nil) || explained.Pod != nil && *explained.Pod != *d.Pod {
				t.Errorf("explained %+v, decided %+v", explained, d)
			}
			wantMatch := tc.config.policy != "" && d.Source != SourceNeverFSBackup
			switch {
			case wantMatch && m == nil:
				t.Error("Explain gave no policy verdicts")
			case !wantMatch && m != nil:
				t.Errorf("Explain gave policy verdicts %+v, want none", m)
			case m != nil && d.Source == SourceRule && (m.Index != d.Rule || len(m.Rejected) != d.Rule):
				t.Errorf("verdicts %+v for rule %d", m, d.Rule)
			case m != nil && d.Source != SourceRule && m.Index != NoRule:
				t.Errorf("verdicts %+v name a rule, but %s decided", m, d.Source)
			}

			// The questions plugins ask agree with the decision.
			if tc.obj != "" {
				got, err := h.ShouldPerformSnapshot(toUnstructured(t, findObj(tc.obj)), groupResourceOf(findObj(tc.obj)))
				if d.Source == SourceUnboundClaim {
					if err == nil {
						t.Error("ShouldPerformSnapshot: no error for a claim without a volume")
					}
				} else if err != nil || got != (d.Action == policy.Snapshot) {
					t.Errorf("ShouldPerformSnapshot = %v, %v; decision %s", got, err, d.Action)
				}
			} else {
				pod := tc.pod.DeepCopy()
				pod.Spec.Volumes = append(pod.Spec.Volumes, tc.vol)
				got, err := h.ShouldPerformFSBackup(tc.vol, *pod)
				if d.Source == SourceUnboundClaim {
					if err == nil || !strings.Contains(err.Error(), tc.reason) {
						t.Errorf("ShouldPerformFSBackup: error %v, want one containing %q", err, tc.reason)
					}
				} else if err != nil || got != (d.Action == policy.FSBackup) {
					t.Errorf("ShouldPerformFSBackup = %v, %v; decision %s", got, err, d.Action)
				}
			}
		})
	}
	for s := SourceRule; s <= SourceDefault; s++ {
		if !reached[s] {
			t.Errorf("no case reaches %s", s)
		}
	}
}

func TestDecisionParametersAreCopies(t *testing.T) {
	h := decisionCase{policy: mixedPolicy}.helper(t)
	obj := toUnstructured(t, findObj("app/vault"))
	for _, decide := range []func() (Decision, error){
		func() (Decision, error) { return h.DecideVolume(obj, PersistentVolumeClaims) },
		func() (Decision, error) { return h.ExplainVolume(obj, PersistentVolumeClaims) },
	} {
		d, err := decide()
		if err != nil {
			t.Fatal(err)
		}
		d.Parameters["plugin"] = "changed"
	}
	if ok, _ := h.ShouldPerformCustomAction(obj, PersistentVolumeClaims, map[string]any{"plugin": "vault"}); !ok {
		t.Error("a decision's parameters are the policy's own map")
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{
		SourceRule: "rule", SourceNeverFSBackup: "neverFSBackup", SourceUnboundClaim: "unboundClaim", SourcePodVolume: "podVolume",
		SourcePodAnnotation: "podAnnotation", SourceDefaultVolumesToFsBackup: "defaultVolumesToFsBackup",
		SourceSnapshotVolumes: "snapshotVolumes", SourceDefault: "default", 0: "Source(0)", SourceDefault + 1: "Source(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// The verdicts Explain hands out hold a copy of the matching policy's
// parameters: changing them changes no later decision.
func TestExplainMatchParametersAreCopies(t *testing.T) {
	h := decisionCase{policy: mixedPolicy}.helper(t)
	obj := toUnstructured(t, findObj("app/vault"))
	d, err := h.ExplainVolume(obj, PersistentVolumeClaims)
	if err != nil || d.Match == nil {
		t.Fatalf("ExplainVolume: %+v, %v", d, err)
	}
	d.Match.Action.Parameters["plugin"] = "changed"
	if ok, _ := h.ShouldPerformCustomAction(obj, PersistentVolumeClaims, map[string]any{"plugin": "vault"}); !ok {
		t.Error("Decision.Match holds the policy's own parameters")
	}
}
