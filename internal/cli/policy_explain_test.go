package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

const explainPolicy = `version: v1
volumePolicies:
- conditions:
    csi: {driver: vault.example.com}
  action:
    type: custom
    parameters: {myCustomAction: true}
- conditions:
    storageClass: [scratch]
  action: {type: skip}
- conditions:
    capacity: "5Gi,"
    storageClass: [gold]
  action: {type: snapshot}
`

func explainPV(name, class, driver, size string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		},
	}
	if driver != "" {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}
	} else {
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data/" + name}
	}
	return pv
}

func explainPVC(ns, name, volume string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	if volume == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	return pvc
}

// explainObjects is a namespace "app" with a claim per storage class, a pod
// that opts its claim into fs-backup, and an unrelated namespace "other".
func explainObjects() []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		explainPV("pv-gold", "gold", "ebs.csi.aws.com", "10Gi"),
		explainPV("pv-small-gold", "gold", "ebs.csi.aws.com", "1Gi"),
		explainPV("pv-scratch", "scratch", "", "1Gi"),
		explainPV("pv-vault", "silver", "vault.example.com", "1Gi"),
		explainPV("pv-bronze", "bronze", "", "1Gi"),
		explainPV("pv-web", "bronze", "", "1Gi"),
		explainPVC("app", "gold", "pv-gold"),
		explainPVC("app", "small-gold", "pv-small-gold"),
		explainPVC("app", "scratch", "pv-scratch"),
		explainPVC("app", "vault", "pv-vault"),
		explainPVC("app", "bronze", "pv-bronze"),
		explainPVC("app", "web-data", "pv-web"),
		explainPVC("other", "elsewhere", "pv-bronze"),
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Annotations: map[string]string{
				"backup.velero.io/backup-volumes": "data",
			}},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "web-data"}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			}},
		},
	}
}

type explainRow struct {
	Volume     string         `json:"volume"`
	Action     string         `json:"action"`
	Parameters map[string]any `json:"parameters"`
	Rule       *int           `json:"rule"`
	Reasons    []string       `json:"reasons"`
}

func explainJSON(t *testing.T, f *Factory, args ...string) map[string]explainRow {
	t.Helper()
	out, _, err := run(t, f, append([]string{"policy", "explain", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []explainRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	byVolume := map[string]explainRow{}
	for _, r := range rows {
		byVolume[r.Volume] = r
	}
	return byVolume
}

func TestPolicyExplainActionsAndRules(t *testing.T) {
	path := writePolicyFile(t, explainPolicy)
	c := newFakeBuilder(t, explainObjects()...).Build()
	rows := explainJSON(t, newTestFactory(c), "--policy-file", path, "--include-namespaces", "app")

	tests := []struct {
		volume  string
		action  string
		rule    int // -1 for none
		reasons []string
	}{
		{"pvc app/vault", "custom", 0, []string{`rule 0 matched: csi: CSI volume, driver "vault.example.com"`}},
		{"pvc app/scratch", "skip", 1, []string{
			"rule 0 did not match: csi: not a CSI volume (type hostPath)",
			`rule 1 matched: storageClass: "scratch" in [scratch]`,
		}},
		{"pvc app/gold", "snapshot", 2, []string{
			`rule 0 did not match: csi: driver "ebs.csi.aws.com" is not "vault.example.com"`,
			`rule 1 did not match: storageClass: "gold" not in [scratch]`,
			`rule 2 matched: capacity: 10Gi in "5Gi,", storageClass: "gold" in [gold]`,
		}},
		{"pvc app/small-gold", "snapshot", -1, []string{
			`rule 0 did not match: csi: driver "ebs.csi.aws.com" is not "vault.example.com"`,
			`rule 1 did not match: storageClass: "gold" not in [scratch]`,
			`rule 2 did not match: capacity: 1Gi not in "5Gi,"`,
			"fallback: snapshotVolumes (unset, so true)",
		}},
		{"pvc app/bronze", "snapshot", -1, []string{
			"rule 0 did not match: csi: not a CSI volume (type hostPath)",
			`rule 1 did not match: storageClass: "bronze" not in [scratch]`,
			`rule 2 did not match: capacity: 1Gi not in "5Gi,"`,
			"fallback: snapshotVolumes (unset, so true)",
		}},
		{"pvc app/web-data", "fs-backup", -1, []string{
			"rule 0 did not match: csi: not a CSI volume (type hostPath)",
			`rule 1 did not match: storageClass: "bronze" not in [scratch]`,
			`rule 2 did not match: capacity: 1Gi not in "5Gi,"`,
			"fallback: pod app/web:data is copied by fs-backup (listed in backup.velero.io/backup-volumes)",
		}},
		{"pod app/web:cache", "skip", -1, []string{
			"rule 0 did not match: csi: not a CSI volume (type emptyDir)",
			"rule 1 did not match: storageClass: the volume has no storage class, want one of [scratch]",
			`rule 2 did not match: capacity: the volume's capacity is unknown, taken as 0 (as Velero does), not in "5Gi,"`,
			"fallback: not listed in backup.velero.io/backup-volumes (defaultVolumesToFsBackup is false)",
		}},
		{"pod app/web:conf", "skip", -1, []string{
			"secret and configMap volumes are never copied (their objects are in the backup)",
		}},
	}
	if len(rows) != len(tests) {
		t.Errorf("%d volumes, want %d: %v", len(rows), len(tests), rows)
	}
	for _, tt := range tests {
		got, ok := rows[tt.volume]
		if !ok {
			t.Errorf("%s: not listed", tt.volume)
			continue
		}
		if got.Action != tt.action {
			t.Errorf("%s: action %q, want %q", tt.volume, got.Action, tt.action)
		}
		if rule := -1; got.Rule != nil && *got.Rule != tt.rule || got.Rule == nil && tt.rule != rule {
			t.Errorf("%s: rule %v, want %d", tt.volume, got.Rule, tt.rule)
		}
		if strings.Join(got.Reasons, "\n") != strings.Join(tt.reasons, "\n") {
			t.Errorf("%s: reasons\n%s\nwant\n%s", tt.volume, strings.Join(got.Reasons, "\n"), strings.Join(tt.reasons, "\n"))
		}
	}
	if p := rows["pvc app/vault"].Parameters; p["myCustomAction"] != true || len(p) != 1 {
		t.Errorf("custom parameters %v", p)
	}
	if p := rows["pvc app/gold"].Parameters; p != nil {
		t.Errorf("snapshot has parameters %v", p)
	}
}

func TestPolicyExplainFallbacksFollowFlags(t *testing.T) {
	path := writePolicyFile(t, explainPolicy)
	c := newFakeBuilder(t, explainObjects()...).Build()
	rows := explainJSON(t, newTestFactory(c), "--policy-file", path, "--include-namespaces", "*",
		"--exclude-namespaces", "other", "--snapshot-volumes=false", "--default-volumes-to-fs-backup")
	want := map[string]string{
		"pvc app/bronze":    "fallback: snapshotVolumes=false",
		"pvc app/web-data":  "fallback: pod app/web:data is copied by fs-backup (defaultVolumesToFsBackup, not in backup.velero.io/backup-volumes-excludes)",
		"pod app/web:cache": "fallback: defaultVolumesToFsBackup, not in backup.velero.io/backup-volumes-excludes",
	}
	for volume, reason := range want {
		reasons := rows[volume].Reasons
		if len(reasons) == 0 || reasons[len(reasons)-1] != reason {
			t.Errorf("%s: reasons %q, want the last to be %q", volume, reasons, reason)
		}
	}
	if _, ok := rows["pvc other/elsewhere"]; ok {
		t.Error("an excluded namespace was explained")
	}
}

func TestPolicyExplainTable(t *testing.T) {
	path := writePolicyFile(t, explainPolicy)
	c := newFakeBuilder(t, explainObjects()...).Build()
	out, _, err := run(t, newTestFactory(c), "policy", "explain", "--policy-file", path, "--include-namespaces", "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"VOLUME",
		`pvc app/vault       custom (myCustomAction=true)  rule 0: csi: CSI volume, driver "vault.example.com"`,
		`pvc app/scratch     skip                          rule 1: storageClass: "scratch" in [scratch] (not rule 0: csi: not a CSI volume (type hostPath))`,
		`pvc app/bronze      snapshot                      no rule matched (rule 0: csi: not a CSI volume (type hostPath); rule 1: storageClass: "bronze" not in [scratch]; rule 2: capacity: 1Gi not in "5Gi,"); fallback: snapshotVolumes (unset, so true)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The backup's own spec and resource policy are used with --backup, and
// each kind is listed once per namespace, whatever the number of volumes.
func TestPolicyExplainFromBackup(t *testing.T) {
	no := false
	objs := append(explainObjects(),
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: v1.DefaultNamespace, Name: "vol-policy"},
			Data:       map[string]string{"policy.yaml": explainPolicy},
		},
		&v1.Backup{
			ObjectMeta: metav1.ObjectMeta{Namespace: v1.DefaultNamespace, Name: "nightly"},
			Spec: v1.BackupSpec{
				IncludedNamespaces: []string{"app"},
				SnapshotVolumes:    &no,
				ResourcePolicy:     &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "vol-policy"},
			},
		})
	lists := map[string]int{}
	c := newFakeBuilder(t, objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := &client.ListOptions{}
			lo.ApplyOptions(opts)
			lists[strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", list), "*v1."), "List")+"/"+lo.Namespace]++
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.PersistentVolume); ok {
				t.Errorf("GET of PersistentVolume %s; PVs are listed once", key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	rows := explainJSON(t, newTestFactory(c), "--backup", "nightly")
	if r := rows["pvc app/vault"]; r.Action != "custom" {
		t.Errorf("vault: %+v, want the backup's policy to apply", r)
	}
	if r := rows["pvc app/bronze"]; r.Action != "skip" || r.Reasons[len(r.Reasons)-1] != "fallback: snapshotVolumes=false" {
		t.Errorf("bronze: %+v, want the backup's snapshotVolumes=false", r)
	}
	want := map[string]int{"PersistentVolume/": 1, "PersistentVolumeClaim/app": 1, "Pod/app": 1}
	for k, n := range want {
		if lists[k] != n {
			t.Errorf("%s listed %d times, want %d (all lists: %v)", k, lists[k], n, lists)
		}
	}
	if len(lists) != len(want) {
		t.Errorf("lists %v, want %v", lists, want)
	}
}

func TestPolicyExplainErrors(t *testing.T) {
	valid := writePolicyFile(t, explainPolicy)
	invalid := writePolicyFile(t, "version: v1\nvolumePolicies:\n- action: {type: archive}\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no policy", []string{"--include-namespaces", "app"}, "no policy given: use --policy-file FILE or --policy-configmap NAME"},
		{"two policies", []string{"--policy-file", valid, "--policy-configmap", "p", "--include-namespaces", "app"}, "--policy-file and --policy-configmap cannot be combined"},
		{"no namespaces", []string{"--policy-file", valid}, "no namespaces given: use --include-namespaces"},
		{"backup and namespaces", []string{"--backup", "b", "--include-namespaces", "app"}, "--include-namespaces cannot be combined with --backup"},
		{"backup and snapshot flag", []string{"--backup", "b", "--snapshot-volumes=false"}, "--snapshot-volumes cannot be combined with --backup"},
		{"bad output", []string{"--policy-file", valid, "--include-namespaces", "app", "-o", "yaml"}, `invalid --output "yaml"`},
		{"invalid policy", []string{"--policy-file", invalid, "--include-namespaces", "app"},
			`invalid resource policy:` + "\n" + `volumePolicies[0].action.type: "archive" is not an action; use snapshot, fs-backup, skip or custom`},
		{"missing ConfigMap", []string{"--policy-configmap", "nope", "--include-namespaces", "app"}, "--policy-configmap: ConfigMap velero/nope not found"},
		{"missing backup", []string{"--backup", "nope"}, `backup "nope" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, explainObjects()...).Build()
			_, _, err := run(t, newTestFactory(c), append([]string{"policy", "explain"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// A whole-cluster backup stores PersistentVolumes no claim stands for, and
// decides them by the volume alone; a backup of some namespaces does not
// hold them (a claim brings its own volume).
func TestPolicyExplainUnclaimedVolumes(t *testing.T) {
	path := writePolicyFile(t, explainPolicy)
	free := explainPV("pv-free", "gold", "ebs.csi.aws.com", "20Gi")
	released := explainPV("pv-released", "scratch", "", "1Gi")
	released.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "gone", Name: "data"}
	c := newFakeBuilder(t, append(explainObjects(), free, released)...).Build()

	rows := explainJSON(t, newTestFactory(c), "--policy-file", path, "--include-namespaces", "*")
	if r := rows["pv pv-free"]; r.Action != "snapshot" || r.Rule == nil || *r.Rule != 2 {
		t.Errorf("pv-free: %+v, want snapshot by rule 2 (gold, 5Gi and more)", r)
	}
	if r := rows["pv pv-released"]; r.Action != "skip" || r.Rule == nil || *r.Rule != 1 {
		t.Errorf("pv-released: %+v, want skip by rule 1 (scratch)", r)
	}
	for _, claimed := range []string{"pv pv-gold", "pv pv-web", "pv pv-bronze"} {
		if _, ok := rows[claimed]; ok {
			t.Errorf("%s has a row of its own; it is explained with its claim", claimed)
		}
	}

	// Velero's rule: with namespaces filtered, cluster-scoped items are
	// left out unless includeClusterResources says otherwise.
	for _, args := range [][]string{{"--include-namespaces", "app"}, {"--include-namespaces", "*", "--exclude-namespaces", "other"}} {
		rows = explainJSON(t, newTestFactory(c), append([]string{"--policy-file", path}, args...)...)
		if _, ok := rows["pv pv-free"]; ok {
			t.Errorf("a backup of %v was said to hold an unclaimed PersistentVolume", args)
		}
	}
}

// What the policy parser accepts but suspects is printed as a warning on
// standard error, the JSON on standard output staying one document.
func TestPolicyExplainWarns(t *testing.T) {
	path := writePolicyFile(t, "version: v1\nvolumePolicies:\n- conditions: {volumeTypes: [configmap]}\n  action: {type: skip}\n")
	c := newFakeBuilder(t, explainObjects()...).Build()
	out, errOut, err := run(t, newTestFactory(c), "policy", "explain", "-o", "json", "--policy-file", path, "--include-namespaces", "app")
	if err != nil {
		t.Fatal(err)
	}
	want := `Warning: volumePolicies[0].conditions.volumeTypes[0]: "configmap" is not a volume type, so it never matches (names are case-sensitive); did you mean "configMap"?`
	if !strings.Contains(errOut, want) {
		t.Errorf("standard error lacks %q:\n%s", want, errOut)
	}
	var rows []explainRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Errorf("standard output is not the explanations (%v): %s", err, out)
	}
	// The pod's configMap volume is not matched by the misspelt rule.
	for _, r := range rows {
		if r.Volume == "pod app/web:conf" && r.Rule != nil {
			t.Errorf("%s matched rule %d; configmap never matches configMap", r.Volume, *r.Rule)
		}
	}
}
