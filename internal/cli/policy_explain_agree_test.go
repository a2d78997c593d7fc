package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// agreePolicy is explainPolicy with a rule for generic ephemeral volumes,
// so that a claim is also copied through a rule on its pod's volume.
const agreePolicy = explainPolicy + `- conditions:
    volumeTypes: [ephemeral]
  action: {type: fs-backup}
`

// agreeObjects adds to explainObjects a pending claim, a pod with a
// generic ephemeral volume and its claim, a pod whose volumes are copied
// by default or not at all, and a PersistentVolume no claim stands for.
func agreeObjects() []client.Object {
	return append(explainObjects(),
		explainPVC("app", "pending", ""),
		explainPV("pv-eph", "bronze", "", "1Gi"),
		explainPVC("app", "eph-scratch", "pv-eph"),
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "eph"},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			}},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "tools", Annotations: map[string]string{
				"backup.velero.io/backup-volumes-excludes": "tmp",
			}},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
				{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "bronze"}}},
			}},
		},
		explainPV("pv-free", "gold", "ebs.csi.aws.com", "20Gi"),
	)
}

// TestPolicyExplainAgreesWithTheBackup: every row of `policy explain` is
// the decision the backup's own VolumeHelper takes for that volume, asked
// directly of the cluster: action, rule, parameters, and the reason that
// decided, for flags and for an existing backup.
func TestPolicyExplainAgreesWithTheBackup(t *testing.T) {
	yes, no := true, false
	noClaims := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.DefaultNamespace, Name: "no-claims"},
		Spec: v1.BackupSpec{
			ExcludedResources: []string{"persistentvolumeclaims"},
			ResourcePolicy:    &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "vol-policy"},
		},
	}
	objs := append(agreeObjects(), noClaims, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.DefaultNamespace, Name: "vol-policy"},
		Data:       map[string]string{"policy.yaml": agreePolicy},
	})
	path := writePolicyFile(t, agreePolicy)
	p, err := policy.ParseFile([]byte(agreePolicy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		spec     v1.BackupSpec
		policies *policy.Policies
	}{
		{"one namespace", []string{"--policy-file", path, "--include-namespaces", "app"},
			v1.BackupSpec{IncludedNamespaces: []string{"app"}}, p},
		{"no policy rules", []string{"--policy-file", writePolicyFile(t, "version: v1\n"), "--include-namespaces", "app"},
			v1.BackupSpec{IncludedNamespaces: []string{"app"}}, nil},
		{"whole cluster, fallbacks set", []string{"--policy-file", path, "--include-namespaces", "*", "--snapshot-volumes=false", "--default-volumes-to-fs-backup"},
			v1.BackupSpec{IncludedNamespaces: []string{"*"}, SnapshotVolumes: &no, DefaultVolumesToFsBackup: &yes}, p},
		{"snapshotVolumes true", []string{"--policy-file", path, "--include-namespaces", "app", "--snapshot-volumes=true"},
			v1.BackupSpec{IncludedNamespaces: []string{"app"}, SnapshotVolumes: &yes}, p},
		{"backup leaving claims out", []string{"--backup", noClaims.Name}, noClaims.Spec, p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeBuilder(t, objs...).Build()
			rows := explainJSON(t, newTestFactory(c), tt.args...)
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			h, err := volumehelper.NewVolumeHelperForSpec(&tt.spec, tt.policies, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			sources := map[volumehelper.Source]bool{}
			for name, row := range rows {
				d := decideRow(t, c, h, name)
				sources[d.Source] = true
				if msg := rowDisagrees(row, d); msg != "" {
					t.Errorf("%s: %s\nexplain: %+v\nhelper:  %+v", name, msg, row, d)
				}
			}
			t.Logf("sources compared: %v", sources)
		})
	}
}

// decideRow asks the helper about the volume a row names, reading it from
// the cluster.
func decideRow(t *testing.T, c client.Client, h volumehelper.VolumeHelper, row string) volumehelper.Decision {
	t.Helper()
	ctx := context.Background()
	kind, name, _ := strings.Cut(row, " ")
	toU := func(obj runtime.Object) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	var d volumehelper.Decision
	var err error
	switch kind {
	case "pvc":
		ns, n, _ := strings.Cut(name, "/")
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pvc); err != nil {
			t.Fatal(err)
		}
		d, err = h.DecideVolume(toU(pvc), volumehelper.PersistentVolumeClaims)
	case "pv":
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
			t.Fatal(err)
		}
		d, err = h.DecideVolume(toU(pv), volumehelper.PersistentVolumes)
	case "pod":
		podName, vol, _ := strings.Cut(name, ":")
		ns, n, _ := strings.Cut(podName, "/")
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod); err != nil {
			t.Fatal(err)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == vol {
				d, err = h.DecidePodVolume(v, *pod)
			}
		}
	default:
		t.Fatalf("row %q names no volume", row)
	}
	if err != nil {
		t.Fatalf("%s: %v", row, err)
	}
	return d
}

// rowDisagrees says how an explain row differs from the helper's decision,
// or "".
func rowDisagrees(row explainRow, d volumehelper.Decision) string {
	if row.Action != string(d.Action) {
		return fmt.Sprintf("action %s, helper %s", row.Action, d.Action)
	}
	if (row.Rule != nil) != (d.Source == volumehelper.SourceRule) || row.Rule != nil && *row.Rule != d.Rule {
		return fmt.Sprintf("rule %v, helper %d by %s", row.Rule, d.Rule, d.Source)
	}
	if d.Action == policy.Custom {
		var params map[string]any
		data, _ := json.Marshal(d.Parameters)
		_ = json.Unmarshal(data, &params)
		if !reflect.DeepEqual(row.Parameters, params) {
			return fmt.Sprintf("parameters %v, helper %v", row.Parameters, d.Parameters)
		}
	}
	if len(row.Reasons) == 0 {
		return "no reasons"
	}
	last := row.Reasons[len(row.Reasons)-1]
	var want string
	switch d.Source {
	case volumehelper.SourceNeverFSBackup:
		if len(row.Reasons) != 1 || last != d.Reason {
			return fmt.Sprintf("reasons %q, helper %q", row.Reasons, d.Reason)
		}
		return ""
	case volumehelper.SourceRule:
		want = fmt.Sprintf("rule %d matched: ", d.Rule)
		if d.Reason != "" {
			want = d.Reason
		}
	case volumehelper.SourcePodVolume:
		want = fmt.Sprintf("fallback: pod %s/%s:%s is copied by fs-backup (", d.Pod.Namespace, d.Pod.Pod, d.Pod.Volume)
	default:
		want = "fallback: " + d.Reason
	}
	if !strings.HasPrefix(last, want) {
		return fmt.Sprintf("last reason %q, want %q", last, want)
	}
	return ""
}

// A backup whose filters leave claims out stores the PVs alone, and no
// pod copies a claim's data: explain must not say fs-backup for them.
func TestPolicyExplainBackupLeavingClaimsOut(t *testing.T) {
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.DefaultNamespace, Name: "no-claims"},
		Spec:       v1.BackupSpec{ExcludedResources: []string{"persistentvolumeclaims"}},
	}
	c := newFakeBuilder(t, append(explainObjects(), b)...).Build()
	rows := explainJSON(t, newTestFactory(c), "--backup", b.Name, "--policy-file", writePolicyFile(t, explainPolicy))
	r := rows["pvc app/web-data"]
	if r.Action != "snapshot" || len(r.Reasons) == 0 || r.Reasons[len(r.Reasons)-1] != "fallback: snapshotVolumes (unset, so true)" {
		t.Errorf("web-data: %+v, want snapshot by snapshotVolumes: the pod's fs-backup does not copy claims this backup leaves out", r)
	}
}
