package policy

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func mustParse(t testing.TB, doc string) *Policies {
	t.Helper()
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return p
}

// ruleFor is a one-rule policy with the given conditions (YAML flow body).
func ruleFor(t *testing.T, conditions string) *Policies {
	return mustParse(t, rule("- conditions: {"+conditions+"}\n  action: {type: skip}\n"))
}

func csiVolume(driver string, attrs map[string]string) VolumeInfo {
	return VolumeInfo{Type: VolumeCSI, CSIDriver: driver, CSIVolumeAttributes: attrs, Capacity: qty("10Gi"), StorageClass: "gold"}
}

func nfsVolume(server, path string) VolumeInfo {
	return VolumeInfo{Type: VolumeNFS, NFSServer: server, NFSPath: path, Capacity: qty("10Gi")}
}

func claimed(v VolumeInfo, phase corev1.PersistentVolumeClaimPhase, labels map[string]string) VolumeInfo {
	v.PVC = "shop/data"
	v.PVCPhase = phase
	v.PVCLabels = labels
	return v
}

// TestConditions checks each condition alone: whether it holds and, when
// it does not, the reason an explanation gives.
func TestConditions(t *testing.T) {
	tests := []struct {
		name       string
		conditions string
		volume     VolumeInfo
		want       bool
		why        string // the failure reason, checked when !want
	}{
		// capacity
		{"capacity inside a closed range", `capacity: "5Gi,20Gi"`, VolumeInfo{Capacity: qty("10Gi")}, true, ""},
		{"capacity bounds are inclusive (lower)", `capacity: "10Gi,20Gi"`, VolumeInfo{Capacity: qty("10Gi")}, true, ""},
		{"capacity bounds are inclusive (upper)", `capacity: "5Gi,10Gi"`, VolumeInfo{Capacity: qty("10Gi")}, true, ""},
		{"capacity above the range", `capacity: "10Gi,15Gi"`, VolumeInfo{Capacity: qty("20Gi")}, false, `capacity: 20Gi not in "10Gi,15Gi"`},
		{"capacity below the range", `capacity: "10Gi,15Gi"`, VolumeInfo{Capacity: qty("1Gi")}, false, `capacity: 1Gi not in "10Gi,15Gi"`},
		{"capacity open below", `capacity: ",5Gi"`, VolumeInfo{Capacity: qty("1Mi")}, true, ""},
		{"capacity open below, too big", `capacity: ",5Gi"`, VolumeInfo{Capacity: qty("6Gi")}, false, `capacity: 6Gi not in ",5Gi"`},
		{"capacity open above", `capacity: "1Ti,"`, VolumeInfo{Capacity: qty("2Ti")}, true, ""},
		{"capacity open above, too small", `capacity: "1Ti,"`, VolumeInfo{Capacity: qty("1000Gi")}, false, `capacity: 1000Gi not in "1Ti,"`},
		{"capacity with a zero upper bound is open above", `capacity: "1Gi,0"`, VolumeInfo{Capacity: qty("1Pi")}, true, ""},
		{"capacity open on both sides matches any known capacity", `capacity: ","`, VolumeInfo{Capacity: qty("0")}, true, ""},
		{"capacity compares across units", `capacity: "1G,1Gi"`, VolumeInfo{Capacity: qty("1000Mi")}, true, ""},
		// Velero takes an unknown capacity as 0.
		{"unknown capacity matches an open range", `capacity: ","`, VolumeInfo{Type: VolumeEmptyDir}, true, ""},
		{"unknown capacity matches a range from 0", `capacity: ",100Gi"`, VolumeInfo{}, true, ""},
		{"unknown capacity does not match a lower bound", `capacity: "1Gi,"`, VolumeInfo{}, false, `capacity: the volume's capacity is unknown, taken as 0 (as Velero does), not in "1Gi,"`},
		{"a negative lower bound is open", `capacity: "-1Gi,2Gi"`, VolumeInfo{Capacity: qty("1Gi")}, true, ""},
		// pvcVolumeMode and pvcAccessModes
		{"volume mode", `pvcVolumeMode: Block`, VolumeInfo{PVC: "a/b", PVCVolumeMode: "Block"}, true, ""},
		{"volume mode differs", `pvcVolumeMode: Block`, VolumeInfo{PVC: "a/b", PVCVolumeMode: "Filesystem"}, false, `pvcVolumeMode: volume mode "Filesystem" is not "Block"`},
		{"access modes as a set", `pvcAccessModes: [ReadOnlyMany, ReadWriteOnce]`, VolumeInfo{PVC: "a/b", PVCAccessModes: []string{"ReadWriteOnce", "ReadOnlyMany"}}, true, ""},
		{"access modes must be exactly these", `pvcAccessModes: [ReadWriteOnce]`, VolumeInfo{PVC: "a/b", PVCAccessModes: []string{"ReadWriteOnce", "ReadOnlyMany"}}, false, "pvcAccessModes: access modes [ReadWriteOnce ReadOnlyMany] are not exactly [ReadWriteOnce]"},
		// An empty wanted attribute value also matches an absent key, as in Velero.
		{"csi attribute wanted empty matches an absent one", `csi: {driver: d, volumeAttributes: {tier: ""}}`, csiVolume("d", map[string]string{"other": "x"}), true, ""},
		// storageClass
		{"storage class in the list", `storageClass: [silver, gold]`, VolumeInfo{StorageClass: "gold"}, true, ""},
		{"storage class not in the list", `storageClass: [silver, bronze]`, VolumeInfo{StorageClass: "gold"}, false, `storageClass: "gold" not in [silver bronze]`},
		{"no storage class", `storageClass: [silver]`, VolumeInfo{}, false, "storageClass: the volume has no storage class, want one of [silver]"},
		{"storage class is case-sensitive", `storageClass: [Gold]`, VolumeInfo{StorageClass: "gold"}, false, `storageClass: "gold" not in [Gold]`},
		// nfs
		{"nfs {} matches any NFS volume", `nfs: {}`, nfsVolume("nas", "/export"), true, ""},
		{"nfs {} does not match CSI", `nfs: {}`, csiVolume("d", nil), false, "nfs: not an NFS volume (type csi)"},
		{"nfs {} does not match an unknown type", `nfs: {}`, VolumeInfo{}, false, "nfs: not an NFS volume (type unknown)"},
		{"nfs server matches", `nfs: {server: nas}`, nfsVolume("nas", "/a"), true, ""},
		{"nfs server differs", `nfs: {server: nas}`, nfsVolume("other", "/a"), false, `nfs: server "other" is not "nas"`},
		{"nfs path matches", `nfs: {path: /a}`, nfsVolume("x", "/a"), true, ""},
		{"nfs path differs", `nfs: {path: /a}`, nfsVolume("x", "/b"), false, `nfs: path "/b" is not "/a"`},
		{"nfs server and path match", `nfs: {server: nas, path: /a}`, nfsVolume("nas", "/a"), true, ""},
		{"nfs server matches, path differs", `nfs: {server: nas, path: /a}`, nfsVolume("nas", "/b"), false, `nfs: path "/b" is not "/a"`},
		// csi
		{"csi {} matches any CSI volume", `csi: {}`, csiVolume("any.csi", nil), true, ""},
		{"csi {} does not match NFS", `csi: {}`, nfsVolume("nas", "/a"), false, "csi: not a CSI volume (type nfs)"},
		{"csi driver matches", `csi: {driver: ebs.csi.aws.com}`, csiVolume("ebs.csi.aws.com", nil), true, ""},
		{"csi driver differs", `csi: {driver: ebs.csi.aws.com}`, csiVolume("efs.csi.aws.com", nil), false, `csi: driver "efs.csi.aws.com" is not "ebs.csi.aws.com"`},
		{"csi attributes are a subset", `csi: {driver: f, volumeAttributes: {protocol: nfs}}`,
			csiVolume("f", map[string]string{"protocol": "nfs", "sku": "premium"}), true, ""},
		{"csi attribute differs", `csi: {driver: f, volumeAttributes: {protocol: nfs}}`,
			csiVolume("f", map[string]string{"protocol": "smb"}), false, `csi: volumeAttributes protocol is "smb", want "nfs"`},
		{"csi attribute missing, first in key order", `csi: {driver: f, volumeAttributes: {b: "2", a: "1"}}`,
			csiVolume("f", nil), false, `csi: volumeAttributes a is not set, want "1"`},
		{"csi attributes right, driver wrong", `csi: {driver: f, volumeAttributes: {protocol: nfs}}`,
			csiVolume("g", map[string]string{"protocol": "nfs"}), false, `csi: driver "g" is not "f"`},
		// volumeTypes
		{"volume type in the list", `volumeTypes: [emptyDir, hostPath]`, VolumeInfo{Type: VolumeHostPath}, true, ""},
		{"volume type not in the list", `volumeTypes: [nfs, csi]`, VolumeInfo{Type: VolumeEmptyDir}, false, `volumeTypes: "emptyDir" not in [nfs csi]`},
		{"unknown volume type", `volumeTypes: [nfs]`, VolumeInfo{}, false, "volumeTypes: the volume's type is unknown, want one of [nfs]"},
		// pvcLabels
		{"pvc labels all present", `pvcLabels: {env: prod, team: a}`,
			claimed(VolumeInfo{}, corev1.ClaimBound, map[string]string{"env": "prod", "team": "a", "extra": "x"}), true, ""},
		{"pvc label differs", `pvcLabels: {env: prod}`,
			claimed(VolumeInfo{}, corev1.ClaimBound, map[string]string{"env": "dev"}), false, `pvcLabels: label env is "dev", want "prod"`},
		{"pvc label missing", `pvcLabels: {env: prod, team: a}`,
			claimed(VolumeInfo{}, corev1.ClaimBound, map[string]string{"env": "prod"}), false, `pvcLabels: label team is not set, want "a"`},
		{"no PVC", `pvcLabels: {env: prod}`, VolumeInfo{Type: VolumeEmptyDir}, false, "pvcLabels: the volume has no PVC"},
		{"an empty label value matches an empty value", `pvcLabels: {marker: ""}`,
			claimed(VolumeInfo{}, corev1.ClaimBound, map[string]string{"marker": ""}), true, ""},
		// pvcPhase
		{"pvc phase in the list", `pvcPhase: [Pending, Lost]`, claimed(VolumeInfo{}, corev1.ClaimLost, nil), true, ""},
		{"pvc phase not in the list", `pvcPhase: [Pending, Lost]`, claimed(VolumeInfo{}, corev1.ClaimBound, nil), false, `pvcPhase: "Bound" not in [Pending Lost]`},
		{"pvc phase without a PVC", `pvcPhase: [Bound]`, VolumeInfo{}, false, "pvcPhase: the volume has no PVC"},
		{"pvc without a phase", `pvcPhase: [Bound]`, claimed(VolumeInfo{}, "", nil), false, "pvcPhase: the PVC has no phase, want one of [Bound]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ruleFor(t, tt.conditions)
			idx, _ := p.MatchAction(tt.volume)
			if got := idx == 0; got != tt.want {
				t.Fatalf("MatchAction index %d, want match=%v", idx, tt.want)
			}
			m := p.Match(tt.volume)
			if m.Index != idx {
				t.Errorf("Match index %d, MatchAction %d", m.Index, idx)
			}
			if tt.want {
				if len(m.Rejected) != 0 || len(m.Matched) != 1 {
					t.Errorf("matched rule explanation: %+v", m)
				}
				return
			}
			if len(m.Rejected) != 1 {
				t.Fatalf("rejections: %+v", m.Rejected)
			}
			if got := m.Rejected[0].ConditionResult.String(); got != tt.why {
				t.Errorf("reason %q, want %q", got, tt.why)
			}
		})
	}
}

const mixedPolicy = `version: v1
volumePolicies:
- conditions:
    storageClass: [scratch]
  action: {type: skip}
- conditions:
    csi: {driver: vault.example.com}
    pvcLabels: {backup: vault}
  action:
    type: custom
    parameters: {vendor: vault, tier: 2}
- conditions:
    capacity: "100Gi,"
    storageClass: [gold, silver]
  action: {type: fs-backup}
- conditions:
    csi: {driver: ebs.csi.aws.com}
  action: {type: snapshot}
- conditions:
    nfs: {}
  action: {type: skip}
`

func TestMatchFirstRuleWinsAndExplains(t *testing.T) {
	p := mustParse(t, mixedPolicy)
	vaultParams := map[string]any{"vendor": "vault", "tier": 2}
	tests := []struct {
		name     string
		volume   VolumeInfo
		index    int
		action   Action
		rejected []string
		matched  []string
	}{
		{
			name:    "the first rule matches, nothing is rejected",
			volume:  VolumeInfo{Type: VolumeCSI, CSIDriver: "ebs.csi.aws.com", StorageClass: "scratch", Capacity: qty("500Gi")},
			index:   0,
			action:  Action{Type: Skip},
			matched: []string{`storageClass: "scratch" in [scratch]`},
		},
		{
			name:   "a custom action with its parameters",
			volume: claimed(VolumeInfo{Type: VolumeCSI, CSIDriver: "vault.example.com", StorageClass: "gold", Capacity: qty("200Gi")}, corev1.ClaimBound, map[string]string{"backup": "vault"}),
			index:  1,
			action: Action{Type: Custom, Parameters: vaultParams},
			rejected: []string{
				`volumePolicies[0]: storageClass: "gold" not in [scratch]`,
			},
			matched: []string{`csi: CSI volume, driver "vault.example.com"`, "pvcLabels: the PVC has backup=vault"},
		},
		{
			name:   "an earlier rule wins over a later one that also matches",
			volume: VolumeInfo{Type: VolumeCSI, CSIDriver: "ebs.csi.aws.com", StorageClass: "gold", Capacity: qty("200Gi")},
			index:  2,
			action: Action{Type: FSBackup},
			rejected: []string{
				`volumePolicies[0]: storageClass: "gold" not in [scratch]`,
				`volumePolicies[1]: csi: driver "ebs.csi.aws.com" is not "vault.example.com"`,
			},
			matched: []string{`capacity: 200Gi in "100Gi,"`, `storageClass: "gold" in [gold silver]`},
		},
		{
			name:   "only the first failing condition of a rule is reported",
			volume: VolumeInfo{Type: VolumeCSI, CSIDriver: "ebs.csi.aws.com", StorageClass: "bronze", Capacity: qty("5Gi")},
			index:  3,
			action: Action{Type: Snapshot},
			rejected: []string{
				`volumePolicies[0]: storageClass: "bronze" not in [scratch]`,
				`volumePolicies[1]: csi: driver "ebs.csi.aws.com" is not "vault.example.com"`,
				`volumePolicies[2]: capacity: 5Gi not in "100Gi,"`,
			},
			matched: []string{`csi: CSI volume, driver "ebs.csi.aws.com"`},
		},
		{
			name:   "no rule matches: every rule is explained",
			volume: VolumeInfo{Type: VolumeEmptyDir},
			index:  -1,
			rejected: []string{
				"volumePolicies[0]: storageClass: the volume has no storage class, want one of [scratch]",
				"volumePolicies[1]: csi: not a CSI volume (type emptyDir)",
				`volumePolicies[2]: capacity: the volume's capacity is unknown, taken as 0 (as Velero does), not in "100Gi,"`,
				"volumePolicies[3]: csi: not a CSI volume (type emptyDir)",
				"volumePolicies[4]: nfs: not an NFS volume (type emptyDir)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, action := p.MatchAction(tt.volume)
			if idx != tt.index || !reflect.DeepEqual(action, tt.action) {
				t.Errorf("MatchAction = %d, %+v; want %d, %+v", idx, action, tt.index, tt.action)
			}
			m := p.Match(tt.volume)
			if m.Index != tt.index || !reflect.DeepEqual(m.Action, tt.action) {
				t.Errorf("Match = %d, %+v; want %d, %+v", m.Index, m.Action, tt.index, tt.action)
			}
			if got := strs(m.Rejected); strings.Join(got, "\n") != strings.Join(tt.rejected, "\n") {
				t.Errorf("rejected:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.rejected, "\n"))
			}
			if got := strs(m.Matched); strings.Join(got, "\n") != strings.Join(tt.matched, "\n") {
				t.Errorf("matched:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.matched, "\n"))
			}
		})
	}
}

func strs[T interface{ String() string }](items []T) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func TestMatchWithoutPolicies(t *testing.T) {
	var nilPolicies *Policies
	if idx, a := nilPolicies.MatchAction(VolumeInfo{}); idx != -1 || a.Type != "" {
		t.Errorf("nil policies: %d %+v", idx, a)
	}
	if m := nilPolicies.Match(VolumeInfo{}); m.Index != -1 {
		t.Errorf("nil policies: %+v", m)
	}
	empty := mustParse(t, "version: v1\n")
	if m := empty.Match(VolumeInfo{Type: VolumeCSI}); m.Index != -1 || len(m.Rejected) != 0 {
		t.Errorf("no volume policies: %+v", m)
	}
}

func TestCatchAllRuleMatchesEverything(t *testing.T) {
	p := mustParse(t, rule("- conditions: {nfs: {}}\n  action: {type: fs-backup}\n- action: {type: snapshot}\n"))
	for _, v := range []VolumeInfo{{}, {Type: VolumeEmptyDir}, csiVolume("x", nil)} {
		m := p.Match(v)
		if m.Index != 1 || m.Action.Type != Snapshot || len(m.Matched) != 0 {
			t.Errorf("%+v: %+v", v, m)
		}
	}
}

func TestMatchActionDoesNotAllocate(t *testing.T) {
	p := mustParse(t, mixedPolicy)
	vols := benchVolumes(100)
	allocs := testing.AllocsPerRun(100, func() {
		for _, v := range vols {
			p.MatchAction(v)
		}
	})
	if allocs != 0 {
		t.Errorf("MatchAction allocates %.1f times per 100 volumes", allocs)
	}
}
