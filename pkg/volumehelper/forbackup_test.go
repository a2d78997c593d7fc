package volumehelper

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

func policyConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func backupWith(spec v1.BackupSpec) *v1.Backup {
	return &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly"}, Spec: spec}
}

func policyRef(kind, name string) *corev1.TypedLocalObjectReference {
	return &corev1.TypedLocalObjectReference{Kind: kind, Name: name}
}

func TestNewVolumeHelperForBackupLoadsPolicy(t *testing.T) {
	objs := append(world(), policyConfigMap("velero", "volumes", map[string]string{"policy.yaml": mixedPolicy}))
	for _, kind := range []string{"configmap", "ConfigMap", "CONFIGMAP"} {
		t.Run(kind, func(t *testing.T) {
			cl, _ := newClient(t, objs...)
			vh, err := NewVolumeHelperForBackup(t.Context(), backupWith(v1.BackupSpec{ResourcePolicy: policyRef(kind, "volumes")}), cl, nil)
			if err != nil {
				t.Fatal(err)
			}
			vault := toUnstructured(t, findObj("app/vault"))
			ok, err := vh.ShouldPerformCustomAction(vault, PersistentVolumeClaims, map[string]any{"plugin": "vault", "level": 2.0})
			checkDecision(t, ok, err, true, "")
			found, typ, params, err := vh.GetActionParameters(vault, PersistentVolumeClaims)
			if err != nil || !found || typ != "custom" || params["plugin"] != "vault" {
				t.Errorf("GetActionParameters = (%v, %q, %v, %v)", found, typ, params, err)
			}
			snap, err := vh.ShouldPerformSnapshot(toUnstructured(t, findObj("pv-nfs")), PersistentVolumes)
			checkDecision(t, snap, err, false, "")
		})
	}
}

func TestNewVolumeHelperForBackupPolicyErrors(t *testing.T) {
	tests := []struct {
		name    string
		ref     *corev1.TypedLocalObjectReference
		objs    []crclient.Object
		wantErr []string
	}{
		{
			name:    "missing ConfigMap",
			ref:     policyRef("configmap", "volumes"),
			wantErr: []string{"resource policy ConfigMap velero/volumes not found"},
		},
		{
			name:    "ConfigMap in another namespace is not used",
			ref:     policyRef("configmap", "volumes"),
			objs:    []crclient.Object{policyConfigMap("app", "volumes", map[string]string{"p": mixedPolicy})},
			wantErr: []string{"ConfigMap velero/volumes not found"},
		},
		{
			name:    "invalid policy",
			ref:     policyRef("configmap", "volumes"),
			objs:    []crclient.Object{policyConfigMap("velero", "volumes", map[string]string{"p": "version: v1\nvolumePolicies:\n- conditions: {capacity: \"lots\"}\n  action: {type: copy}\n"})},
			wantErr: []string{"ConfigMap velero/volumes: volumePolicies[0].conditions.capacity", "ConfigMap velero/volumes: volumePolicies[0].action.type"},
		},
		{
			name:    "two data keys",
			ref:     policyRef("configmap", "volumes"),
			objs:    []crclient.Object{policyConfigMap("velero", "volumes", map[string]string{"a": mixedPolicy, "b": mixedPolicy})},
			wantErr: []string{"ConfigMap velero/volumes: data: has 2 keys (a, b)"},
		},
		{
			name:    "no name",
			ref:     policyRef("configmap", ""),
			wantErr: []string{"spec.resourcePolicy.name is empty"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, _ := newClient(t, tc.objs...)
			_, err := NewVolumeHelperForBackup(t.Context(), backupWith(v1.BackupSpec{ResourcePolicy: tc.ref}), cl, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), "backup velero/nightly") {
				t.Errorf("error %q does not name the backup", err)
			}
		})
	}
}

func TestNewVolumeHelperForBackupArguments(t *testing.T) {
	cl, _ := newClient(t)
	if _, err := NewVolumeHelperForBackup(t.Context(), nil, cl, nil); err == nil {
		t.Error("no error for a nil backup")
	}
	if _, err := NewVolumeHelperForBackup(t.Context(), backupWith(v1.BackupSpec{}), nil, nil); err == nil {
		t.Error("no error for a nil client")
	}
	p, err := LoadPolicies(t.Context(), backupWith(v1.BackupSpec{}), cl)
	if p != nil || err != nil {
		t.Errorf("LoadPolicies without a resourcePolicy = (%v, %v), want nil, nil", p, err)
	}
}

// TestNewVolumeHelperForBackupSpec checks the fallbacks taken from the
// spec: snapshotVolumes, defaultVolumesToFsBackup and its deprecated
// spelling, and the resource filters behind backupExcludePVC.
func TestNewVolumeHelperForBackupSpec(t *testing.T) {
	plainPod := newPod("app", "db", nil, claimVolume("data", "plain"))
	tests := []struct {
		name     string
		spec     v1.BackupSpec
		snapshot bool // for app/plain
		fs       bool // for volume data of pod app/db (claim app/plain)
	}{
		{"defaults", v1.BackupSpec{}, true, false},
		{"snapshotVolumes false", v1.BackupSpec{SnapshotVolumes: ptr(false)}, false, false},
		{"defaultVolumesToFsBackup", v1.BackupSpec{DefaultVolumesToFsBackup: ptr(true)}, false, true},
		{"defaultVolumesToRestic", v1.BackupSpec{DefaultVolumesToRestic: ptr(true)}, false, true},
		{"defaultVolumesToRestic true wins over false", v1.BackupSpec{DefaultVolumesToRestic: ptr(true), DefaultVolumesToFsBackup: ptr(false)}, false, true},
		{"defaultVolumesToRestic false", v1.BackupSpec{DefaultVolumesToRestic: ptr(false)}, true, false},
		{"claims excluded", v1.BackupSpec{DefaultVolumesToFsBackup: ptr(true), ExcludedResources: []string{"pvc"}}, true, false},
		{"claims not included", v1.BackupSpec{DefaultVolumesToFsBackup: ptr(true), IncludedNamespaceScopedResources: []string{"pods", "deployments"}}, true, false},
		{"claims included", v1.BackupSpec{DefaultVolumesToFsBackup: ptr(true), IncludedResources: []string{"pods", "persistentvolumeclaims"}}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, _ := newClient(t, world()...)
			vh, err := NewVolumeHelperForBackup(t.Context(), backupWith(tc.spec), cl, nil)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := vh.ShouldPerformSnapshot(toUnstructured(t, findObj("app/plain")), PersistentVolumeClaims)
			checkDecision(t, snap, err, tc.snapshot, "")
			fs, err := vh.ShouldPerformFSBackup(plainPod.Spec.Volumes[0], *plainPod)
			checkDecision(t, fs, err, tc.fs, "")
		})
	}
}

func TestNewVolumeHelperForBackupNamespaces(t *testing.T) {
	cl, c := newClient(t, spread(3, 2)...)
	vh, err := NewVolumeHelperForBackup(t.Context(), backupWith(v1.BackupSpec{IncludedNamespaces: []string{"ns1", "ns0", "ns2"}, ExcludedNamespaces: []string{"ns2"}}), cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	snapshotAll(t, vh, 2, 2)
	if got := c.namespacesListed(); !slices.Equal(got, []string{"ns1", "ns0"}) {
		t.Errorf("listed %q, want the backup's namespaces ns1, ns0", got)
	}
}

func TestBackupNamespaces(t *testing.T) {
	tests := []struct {
		name             string
		included, excl   []string
		wantNS, wantSkip []string
	}{
		{"all", nil, nil, []string{"*"}, nil},
		{"star", []string{"*"}, []string{"kube-system"}, []string{"*"}, []string{"kube-system"}},
		{"pattern", []string{"app-*", "db"}, []string{"app-test", "tmp-?"}, []string{"*"}, []string{"app-test"}},
		{"names minus excluded", []string{"a", "b", "c"}, []string{"b"}, []string{"a", "c"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, skip := backupNamespaces(&v1.BackupSpec{IncludedNamespaces: tc.included, ExcludedNamespaces: tc.excl})
			if !slices.Equal(ns, tc.wantNS) || !slices.Equal(skip, tc.wantSkip) {
				t.Errorf("got %q skip %q, want %q skip %q", ns, skip, tc.wantNS, tc.wantSkip)
			}
		})
	}
}

func TestExcludesClaims(t *testing.T) {
	withPolicyFilters := &policy.Policies{IncludeExcludePolicy: &policy.IncludeExcludePolicy{ExcludedNamespaceScopedResources: []string{"persistentvolumeclaims"}}}
	tests := []struct {
		name string
		spec v1.BackupSpec
		p    *policy.Policies
		want bool
	}{
		{"no filters", v1.BackupSpec{}, nil, false},
		{"excluded by plural", v1.BackupSpec{ExcludedResources: []string{"persistentvolumeclaims"}}, nil, true},
		{"excluded by singular", v1.BackupSpec{ExcludedResources: []string{"PersistentVolumeClaim"}}, nil, true},
		{"excluded by short name", v1.BackupSpec{ExcludedNamespaceScopedResources: []string{"pvc"}}, nil, true},
		{"excluded by pattern", v1.BackupSpec{ExcludedResources: []string{"persistent*"}}, nil, true},
		{"star in excludes is ignored", v1.BackupSpec{ExcludedResources: []string{"*"}}, nil, false},
		{"other resources excluded", v1.BackupSpec{ExcludedResources: []string{"persistentvolumes", "secrets"}}, nil, false},
		{"includes without claims", v1.BackupSpec{IncludedResources: []string{"pods"}}, nil, true},
		{"includes star", v1.BackupSpec{IncludedResources: []string{"*"}}, nil, false},
		{"includes claims", v1.BackupSpec{IncludedNamespaceScopedResources: []string{"deployments", "pvc"}}, nil, false},
		{"policy's includeExcludePolicy", v1.BackupSpec{}, withPolicyFilters, true},
		{"spec's scoped filters win over the policy's", v1.BackupSpec{ExcludedNamespaceScopedResources: []string{"secrets"}}, withPolicyFilters, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := excludesClaims(&tc.spec, tc.p); got != tc.want {
				t.Errorf("excludesClaims = %v, want %v", got, tc.want)
			}
		})
	}
}

// Velero reads spec.resourcePolicy only when its kind is configmap, in any
// case, and ignores other kinds: the backup runs without a policy, and
// Lifeboat says so in a warning.
func TestPolicyKindAsVelero(t *testing.T) {
	cl, _ := newClient(t, policyConfigMap("velero", "volumes", map[string]string{"p": mixedPolicy}))
	for _, kind := range []string{"configmap", "ConfigMap", "CONFIGMAP"} {
		b := backupWith(v1.BackupSpec{ResourcePolicy: policyRef(kind, "volumes")})
		p, err := LoadPolicies(t.Context(), b, cl)
		if err != nil || p == nil {
			t.Errorf("kind %q: policy %v, error %v; want the policy", kind, p, err)
		}
		if w := PolicyKindWarning(b); w != "" {
			t.Errorf("kind %q: warning %q", kind, w)
		}
	}
	b := backupWith(v1.BackupSpec{ResourcePolicy: policyRef("Secret", "volumes")})
	if p, err := LoadPolicies(t.Context(), b, cl); p != nil || err != nil {
		t.Errorf("kind Secret: policy %v, error %v; want none, as Velero", p, err)
	}
	if w := PolicyKindWarning(b); !strings.Contains(w, `spec.resourcePolicy.kind "Secret"`) || !strings.Contains(w, "kind: configmap") {
		t.Errorf("kind Secret: warning %q does not name the field and the fix", w)
	}
}
