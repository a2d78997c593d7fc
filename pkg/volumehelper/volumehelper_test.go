package volumehelper

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// mixedPolicy gives each kind of volume in the fixtures a different action.
const mixedPolicy = `
version: v1
volumePolicies:
- conditions: {pvcPhase: [Pending, Lost]}
  action: {type: skip}
- conditions: {storageClass: [gold]}
  action: {type: snapshot}
- conditions: {storageClass: [files]}
  action: {type: fs-backup}
- conditions: {nfs: {}}
  action: {type: skip}
- conditions: {pvcLabels: {backup: vault}}
  action:
    type: custom
    parameters: {plugin: vault, level: 2, tiers: [{name: hot, days: 7}]}
- conditions: {storageClass: [archive]}
  action:
    type: custom
    parameters: {plugin: tape}
- conditions: {volumeTypes: [emptyDir]}
  action: {type: fs-backup}
- conditions: {volumeTypes: [ephemeral]}
  action: {type: fs-backup}
`

// world is the cluster every decision table runs against.
func world() []crclient.Object {
	return []crclient.Object{
		newPV("pv-gold", storageClass("gold"), claimRef("app", "gold", "")),
		newPVC("app", "gold", "pv-gold", func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr("gold") }),
		newPV("pv-files", storageClass("files"), claimRef("app", "files", "")),
		newPVC("app", "files", "pv-files"),
		newPV("pv-nfs", storageClass(""), nfs(), claimRef("app", "nfs", "")),
		newPVC("app", "nfs", "pv-nfs"),
		newPV("pv-vault", claimRef("app", "vault", "uid-vault")),
		newPVC("app", "vault", "pv-vault", labels("backup", "vault"), uid("uid-vault")),
		newPV("pv-archive", storageClass("archive"), claimRef("app", "archive", "")),
		newPVC("app", "archive", "pv-archive"),
		// No rule matches these: the fallbacks decide.
		newPV("pv-plain", claimRef("app", "plain", "")),
		newPVC("app", "plain", "pv-plain"),
		newPV("pv-optin", claimRef("app", "optin", "")),
		newPVC("app", "optin", "pv-optin"),
		newPV("pv-unclaimed"),
		// A PV whose claim was deleted and recreated, now bound elsewhere.
		newPV("pv-stale", claimRef("app", "reused", "uid-old")),
		newPVC("app", "reused", "pv-other", labels("backup", "vault"), uid("uid-new")),
		newPV("pv-other", claimRef("app", "reused", "uid-new")),
		newPVC("app", "pending", ""),
		newPVC("app", "lost", "pv-gone", phase(corev1.ClaimLost)),
		newPVC("app", "dangling", "pv-gone"),
		// The ephemeral volume "scratch" of pod "eph" has claim "eph-scratch".
		newPV("pv-eph", claimRef("app", "eph-scratch", "")),
		newPVC("app", "eph-scratch", "pv-eph"),
		newPod("app", "db", nil, claimVolume("data", "plain"), claimVolume("files", "files")),
		newPod("app", "web", map[string]string{VolumesToBackupAnnotation: "cache, optin"},
			claimVolume("optin", "optin"), emptyDirVolume("cache")),
		newPod("app", "eph", nil, ephemeralVolume("scratch")),
	}
}

type decisionCase struct {
	name   string
	policy string // "" for none
	// fallbacks
	snapshotVolumes *bool
	defaultFS       bool
	excludePVC      bool

	obj  crclient.Object
	want bool
	// wantErr is a substring of the expected error.
	wantErr string
}

func (tc decisionCase) helper(t *testing.T) *helper {
	t.Helper()
	cl, _ := newClient(t, world()...)
	var p *policy.Policies
	if tc.policy != "" {
		p = mustParse(t, tc.policy)
	}
	return mustHelper(t, config{
		policies: p, snapshotVolumes: tc.snapshotVolumes, client: cl,
		defaultVolumesToFSBackup: tc.defaultFS, backupExcludePVC: tc.excludePVC,
		namespaces: []string{"app"},
	})
}

func groupResourceOf(obj crclient.Object) schema.GroupResource {
	if _, ok := obj.(*corev1.PersistentVolume); ok {
		return PersistentVolumes
	}
	return PersistentVolumeClaims
}

func checkDecision(t *testing.T, got bool, err error, want bool, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func findObj(name string) crclient.Object {
	ns, n, namespaced := strings.Cut(name, "/")
	for _, o := range world() {
		if namespaced && o.GetNamespace() == ns && o.GetName() == n {
			return o
		}
		if !namespaced && o.GetNamespace() == "" && o.GetName() == name {
			return o
		}
	}
	panic("no fixture " + name)
}

func TestShouldPerformSnapshot(t *testing.T) {
	tests := []decisionCase{
		// The first matching volume policy decides.
		{name: "snapshot rule, asked by claim", policy: mixedPolicy, obj: findObj("app/gold"), want: true},
		{name: "snapshot rule, asked by volume", policy: mixedPolicy, obj: findObj("pv-gold"), want: true},
		{name: "snapshot rule wins over snapshotVolumes false", policy: mixedPolicy, snapshotVolumes: ptr(false), obj: findObj("app/gold"), want: true},
		{name: "fs-backup rule", policy: mixedPolicy, obj: findObj("app/files"), want: false},
		{name: "skip rule", policy: mixedPolicy, obj: findObj("pv-nfs"), want: false},
		{name: "custom rule", policy: mixedPolicy, obj: findObj("app/archive"), want: false},
		{name: "claim labels reached from the volume", policy: mixedPolicy, obj: findObj("pv-vault"), want: false},
		{name: "claim of a reused name is not the volume's", policy: mixedPolicy, obj: findObj("pv-stale"), want: true},

		// With no matching rule, snapshotVolumes decides; nil means yes.
		{name: "no rule, snapshotVolumes unset", policy: mixedPolicy, obj: findObj("app/plain"), want: true},
		{name: "no policy, snapshotVolumes unset", obj: findObj("app/plain"), want: true},
		{name: "no policy, snapshotVolumes true", snapshotVolumes: ptr(true), obj: findObj("pv-plain"), want: true},
		{name: "no policy, snapshotVolumes false", snapshotVolumes: ptr(false), obj: findObj("pv-plain"), want: false},
		{name: "volume without claim", obj: findObj("pv-unclaimed"), want: true},

		// ... unless a pod's fs-backup copies the volume.
		{name: "opted in by annotation", obj: findObj("app/optin"), want: false},
		{name: "opted in, asked by volume", obj: findObj("pv-optin"), want: false},
		{name: "fs-backup by default", defaultFS: true, obj: findObj("app/plain"), want: false},
		{name: "fs-backup by default, claims excluded from the backup", defaultFS: true, excludePVC: true, obj: findObj("app/plain"), want: true},
		{name: "ephemeral volume copied by default", defaultFS: true, obj: findObj("app/eph-scratch"), want: false},
		{name: "ephemeral volume, not by default", obj: findObj("app/eph-scratch"), want: true},
		{name: "ephemeral volume picked for fs-backup by a rule on its type", policy: mixedPolicy, obj: findObj("pv-eph"), want: false},

		// A claim without a volume is an error unless a rule decides it.
		{name: "pending claim, no policy", obj: findObj("app/pending"), wantErr: "app/pending has no volume bound"},
		{name: "pending claim skipped by a pvcPhase rule", policy: mixedPolicy, obj: findObj("app/pending"), want: false},
		{name: "lost claim skipped by a pvcPhase rule", policy: mixedPolicy, obj: findObj("app/lost"), want: false},
		{name: "claim bound to a missing volume", policy: mixedPolicy, obj: findObj("app/dangling"), wantErr: "PersistentVolume pv-gone, which does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.helper(t)
			got, err := h.ShouldPerformSnapshot(toUnstructured(t, tc.obj), groupResourceOf(tc.obj))
			checkDecision(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestShouldPerformSnapshotOptOut(t *testing.T) {
	cl, _ := newClient(t,
		newPV("pv-a", claimRef("ns", "a", "")), newPVC("ns", "a", "pv-a"),
		newPod("ns", "p", map[string]string{VolumesToExcludeAnnotation: "other,data"}, claimVolume("data", "a")),
	)
	h := mustHelper(t, config{client: cl, defaultVolumesToFSBackup: true})
	got, err := h.ShouldPerformSnapshot(toUnstructured(t, newPVC("ns", "a", "pv-a")), PersistentVolumeClaims)
	checkDecision(t, got, err, true, "")
}

func TestShouldPerformSnapshotBadInput(t *testing.T) {
	h := decisionCase{policy: mixedPolicy}.helper(t)
	pod := toUnstructured(t, newPod("app", "db", nil))
	tests := []struct {
		name    string
		obj     *unstructured.Unstructured
		gr      schema.GroupResource
		wantErr string
	}{
		{"not a volume resource", pod, schema.GroupResource{Resource: "pods"}, `"pods" is not a volume resource`},
		{"pod passed as a claim", pod, PersistentVolumeClaims, "object is a Pod, not a PersistentVolumeClaim"},
		{"nil object", nil, PersistentVolumes, "no persistentvolumes object"},
		{"malformed content", &unstructured.Unstructured{Object: map[string]any{"spec": "nonsense"}}, PersistentVolumes, "reading PersistentVolume"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var obj = tc.obj
			var err error
			if obj == nil {
				_, err = h.ShouldPerformSnapshot(nil, tc.gr)
			} else {
				_, err = h.ShouldPerformSnapshot(obj, tc.gr)
			}
			checkDecision(t, false, err, false, tc.wantErr)
			if obj != nil {
				_, err = h.ShouldPerformCustomAction(obj, tc.gr, nil)
				checkDecision(t, false, err, false, tc.wantErr)
				_, _, _, err = h.GetActionParameters(obj, tc.gr)
				checkDecision(t, false, err, false, tc.wantErr)
			}
		})
	}
}

type fsCase struct {
	name       string
	policy     string
	defaultFS  bool
	excludePVC bool
	pod        *corev1.Pod
	volume     corev1.Volume
	want       bool
	wantErr    string
}

func TestShouldPerformFSBackup(t *testing.T) {
	// matchAll sends every volume to fs-backup, to show which volumes are
	// never copied whatever the policy says.
	const matchAll = "version: v1\nvolumePolicies:\n- conditions: {}\n  action: {type: fs-backup}\n"
	token := corev1.Volume{Name: "kube-api-access-x1", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}
	legacyToken := corev1.Volume{Name: "default-token-abcde", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}}
	legacyTokenOther := corev1.Volume{Name: "default-token-abcde", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	never := []corev1.Volume{
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
		token, legacyToken, legacyTokenOther,
	}
	plainPod := newPod("app", "db", nil)
	optIn := newPod("app", "web", map[string]string{VolumesToBackupAnnotation: "cache, data"})
	optOut := newPod("app", "web", map[string]string{VolumesToExcludeAnnotation: "cache"})

	var tests []fsCase
	for _, v := range never {
		tests = append(tests,
			fsCase{name: "never " + v.Name + ", by default", defaultFS: true, pod: plainPod, volume: v, want: false},
			fsCase{name: "never " + v.Name + ", opted in", pod: newPod("app", "p", map[string]string{VolumesToBackupAnnotation: v.Name}), volume: v, want: false},
			fsCase{name: "never " + v.Name + ", policy says fs-backup", policy: matchAll, pod: plainPod, volume: v, want: false},
		)
	}
	tests = append(tests, []fsCase{
		// Without a matching rule: defaultVolumesToFsBackup and annotations.
		{name: "opt-in listed (spaces ignored)", pod: optIn, volume: emptyDirVolume("data"), want: true},
		{name: "opt-in not listed", pod: optIn, volume: emptyDirVolume("other"), want: false},
		{name: "opt-in, no annotation", pod: plainPod, volume: emptyDirVolume("data"), want: false},
		{name: "default, not opted out", defaultFS: true, pod: optOut, volume: emptyDirVolume("data"), want: true},
		{name: "default, opted out", defaultFS: true, pod: optOut, volume: emptyDirVolume("cache"), want: false},
		{name: "default, opt-in annotation ignored", defaultFS: true, pod: newPod("app", "p", map[string]string{VolumesToBackupAnnotation: "x"}), volume: emptyDirVolume("data"), want: true},
		{name: "claim volume by default", defaultFS: true, pod: plainPod, volume: claimVolume("data", "plain"), want: true},
		{name: "claim volume, claims excluded from the backup", defaultFS: true, excludePVC: true, pod: plainPod, volume: claimVolume("data", "plain"), want: false},
		{name: "claim volume opted in, claims excluded", excludePVC: true, pod: optIn, volume: claimVolume("data", "plain"), want: false},
		{name: "no policy: a missing claim is not looked up", defaultFS: true, pod: plainPod, volume: claimVolume("data", "missing"), want: true},

		// A matching rule decides.
		{name: "rule on the claim's storage class", policy: mixedPolicy, pod: plainPod, volume: claimVolume("files", "files"), want: true},
		{name: "snapshot rule beats default fs-backup", policy: mixedPolicy, defaultFS: true, pod: plainPod, volume: claimVolume("data", "gold"), want: false},
		{name: "custom rule beats an opt-in", policy: mixedPolicy, pod: optIn, volume: claimVolume("data", "vault"), want: false},
		{name: "rule on the pod volume's type", policy: mixedPolicy, pod: plainPod, volume: emptyDirVolume("cache"), want: true},
		{name: "rule on an ephemeral volume's type", policy: mixedPolicy, pod: newPod("app", "eph", nil), volume: ephemeralVolume("scratch"), want: true},
		{name: "no rule matches: annotations", policy: mixedPolicy, pod: optIn, volume: claimVolume("data", "plain"), want: true},
		{name: "no rule matches, not selected", policy: mixedPolicy, pod: plainPod, volume: claimVolume("data", "plain"), want: false},
		{name: "pending claim decided by a pvcPhase rule", policy: mixedPolicy, defaultFS: true, pod: plainPod, volume: claimVolume("data", "pending"), want: false},

		// Errors, as Velero reports them when a policy is in force.
		{name: "missing claim", policy: mixedPolicy, pod: plainPod, volume: claimVolume("data", "missing"), wantErr: "uses PersistentVolumeClaim missing, which does not exist"},
		{name: "pending claim, no rule", policy: "version: v1\nvolumePolicies:\n- conditions: {storageClass: [gold]}\n  action: {type: snapshot}\n",
			defaultFS: true, pod: plainPod, volume: claimVolume("data", "pending"), wantErr: "volume data of pod app/db: PersistentVolumeClaim app/pending has no volume bound"},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := decisionCase{policy: tc.policy, defaultFS: tc.defaultFS, excludePVC: tc.excludePVC}.helper(t)
			pod := tc.pod.DeepCopy()
			pod.Spec.Volumes = append(pod.Spec.Volumes, tc.volume)
			got, err := h.ShouldPerformFSBackup(tc.volume, *pod)
			checkDecision(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestShouldPerformCustomAction(t *testing.T) {
	vault := findObj("app/vault")
	tests := []struct {
		name    string
		policy  string
		obj     crclient.Object
		params  map[string]any
		want    bool
		wantErr string
	}{
		{name: "nil params match any custom action", policy: mixedPolicy, obj: vault, params: nil, want: true},
		{name: "empty params", policy: mixedPolicy, obj: vault, params: map[string]any{}, want: true},
		{name: "identifying parameter", policy: mixedPolicy, obj: vault, params: map[string]any{"plugin": "vault"}, want: true},
		{name: "another plugin's parameter", policy: mixedPolicy, obj: vault, params: map[string]any{"plugin": "tape"}, want: false},
		{name: "int in policy, float64 from JSON", policy: mixedPolicy, obj: vault, params: map[string]any{"level": 2.0}, want: true},
		{name: "int64", policy: mixedPolicy, obj: vault, params: map[string]any{"level": int64(2)}, want: true},
		{name: "wrong number", policy: mixedPolicy, obj: vault, params: map[string]any{"level": 2.5}, want: false},
		{name: "number as string", policy: mixedPolicy, obj: vault, params: map[string]any{"level": "2"}, want: false},
		{name: "nested list of maps", policy: mixedPolicy, obj: vault,
			params: map[string]any{"tiers": []any{map[any]any{"name": "hot", "days": 7.0}}}, want: true},
		{name: "nested value differs", policy: mixedPolicy, obj: vault,
			params: map[string]any{"tiers": []any{map[string]any{"name": "hot", "days": 8}}}, want: false},
		{name: "key the action lacks", policy: mixedPolicy, obj: vault, params: map[string]any{"plugin": "vault", "zone": "eu"}, want: false},
		{name: "asked by volume", policy: mixedPolicy, obj: findObj("pv-vault"), params: map[string]any{"plugin": "vault"}, want: true},
		{name: "second custom rule", policy: mixedPolicy, obj: findObj("app/archive"), params: map[string]any{"plugin": "tape"}, want: true},
		{name: "second custom rule, first plugin", policy: mixedPolicy, obj: findObj("app/archive"), params: map[string]any{"plugin": "vault"}, want: false},
		{name: "snapshot action", policy: mixedPolicy, obj: findObj("app/gold"), want: false},
		{name: "no matching rule", policy: mixedPolicy, obj: findObj("app/plain"), want: false},
		{name: "no policy", obj: vault, want: false},
		{name: "unbound claim, no rule: no error", policy: "version: v1\nvolumePolicies:\n- conditions: {storageClass: [gold]}\n  action: {type: custom}\n",
			obj: findObj("app/pending"), want: false},
		{name: "unbound claim decided by the claim alone", policy: "version: v1\nvolumePolicies:\n- conditions: {pvcPhase: [Pending]}\n  action: {type: custom, parameters: {plugin: later}}\n",
			obj: findObj("app/pending"), params: map[string]any{"plugin": "later"}, want: true},
		{name: "claim bound to a missing volume: no error", policy: mixedPolicy, obj: findObj("app/dangling"), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := decisionCase{policy: tc.policy}.helper(t)
			got, err := h.ShouldPerformCustomAction(toUnstructured(t, tc.obj), groupResourceOf(tc.obj), tc.params)
			checkDecision(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestGetActionParameters(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		obj        crclient.Object
		found      bool
		actionType string
		params     map[string]any
	}{
		{"custom with parameters", mixedPolicy, findObj("app/vault"), true, "custom",
			map[string]any{"plugin": "vault", "level": 2, "tiers": []any{map[string]any{"name": "hot", "days": 7}}}},
		{"custom asked by volume", mixedPolicy, findObj("pv-vault"), true, "custom",
			map[string]any{"plugin": "vault", "level": 2, "tiers": []any{map[string]any{"name": "hot", "days": 7}}}},
		{"snapshot without parameters", mixedPolicy, findObj("app/gold"), true, "snapshot", nil},
		{"skip of a pending claim", mixedPolicy, findObj("app/pending"), true, "skip", nil},
		{"no matching rule", mixedPolicy, findObj("app/plain"), false, "", nil},
		{"no policy", "", findObj("app/vault"), false, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := decisionCase{policy: tc.policy}.helper(t)
			found, typ, params, err := h.GetActionParameters(toUnstructured(t, tc.obj), groupResourceOf(tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.found || typ != tc.actionType || !ValuesEqual(params, tc.params) {
				t.Errorf("got (%v, %q, %v), want (%v, %q, %v)", found, typ, params, tc.found, tc.actionType, tc.params)
			}
		})
	}
}

// TestGetActionParametersCopies: a plugin changing the map it got must not
// change what other callers see.
func TestGetActionParametersCopies(t *testing.T) {
	h := decisionCase{policy: mixedPolicy}.helper(t)
	obj := toUnstructured(t, findObj("app/vault"))
	_, _, params, err := h.GetActionParameters(obj, PersistentVolumeClaims)
	if err != nil {
		t.Fatal(err)
	}
	params["plugin"] = "changed"
	params["tiers"].([]any)[0].(map[string]any)["days"] = 0
	_, _, again, _ := h.GetActionParameters(obj, PersistentVolumeClaims)
	if again["plugin"] != "vault" || !ValuesEqual(again["tiers"], []any{map[string]any{"name": "hot", "days": 7}}) {
		t.Errorf("parameters changed through a returned copy: %v", again)
	}
	if ok, _ := h.ShouldPerformCustomAction(obj, PersistentVolumeClaims, map[string]any{"plugin": "vault"}); !ok {
		t.Error("custom action no longer matches after a returned copy was changed")
	}
}

// TestEmptyVolumePolicies: a policy with only includeExcludePolicy decides
// no volume, so it behaves as no policy (no claim lookups, no errors for
// pending claims mounted by pods).
func TestEmptyVolumePolicies(t *testing.T) {
	h := decisionCase{policy: "version: v1\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [events]\n", defaultFS: true}.helper(t)
	got, err := h.ShouldPerformFSBackup(claimVolume("data", "pending"), *newPod("app", "db", nil, claimVolume("data", "pending")))
	checkDecision(t, got, err, true, "")
}

func TestNewVolumeHelper(t *testing.T) {
	if _, err := NewVolumeHelper(nil, nil, nil, nil, false, false, nil); err == nil {
		t.Error("no error without a client")
	}
	cl, _ := newClient(t, world()...)
	snap := true
	vh, err := NewVolumeHelper(nil, &snap, nil, cl, false, false, []string{"app"})
	if err != nil {
		t.Fatal(err)
	}
	// The helper keeps its own copy of the flag.
	snap = false
	got, err := vh.ShouldPerformSnapshot(toUnstructured(t, findObj("pv-unclaimed")), PersistentVolumes)
	checkDecision(t, got, err, true, "")
}
