package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// rule wraps one volume policy in a v1 document.
func rule(body string) string {
	return "version: v1\nvolumePolicies:\n" + body
}

func TestParse(t *testing.T) {
	skip := Action{Type: Skip}
	tests := []struct {
		name string
		doc  string
		want *Policies
	}{
		{
			name: "version only",
			doc:  "version: v1\n",
			want: &Policies{Version: "v1"},
		},
		{
			name: "a rule without conditions matches everything, as in Velero",
			doc:  rule("- action: {type: skip}\n- conditions: {}\n  action: {type: snapshot}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{Action: skip}, {Action: Action{Type: Snapshot}}}},
		},
		{
			name: "closed capacity range",
			doc:  rule("- conditions: {capacity: \"10Gi,100Gi\"}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{Capacity: &CapacityRange{Min: qty("10Gi"), Max: qty("100Gi"), Raw: "10Gi,100Gi"}},
				Action:     skip,
			}}},
		},
		{
			name: "capacity open below, with spaces",
			doc:  rule("- conditions: {capacity: \" , 5Gi \"}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{Capacity: &CapacityRange{Max: qty("5Gi"), Raw: " , 5Gi "}},
				Action:     skip,
			}}},
		},
		{
			name: "capacity open above",
			doc:  rule("- conditions: {capacity: \"1Ti,\"}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{Capacity: &CapacityRange{Min: qty("1Ti"), Raw: "1Ti,"}},
				Action:     skip,
			}}},
		},
		{
			name: "a zero bound is open, as in Velero (\"0,5Gi\" and \"5Gi,0\")",
			doc: rule("- conditions: {capacity: \"0,5Gi\"}\n  action: {type: skip}\n" +
				"- conditions: {capacity: \"5Gi,0\"}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{
				{Conditions: Conditions{Capacity: &CapacityRange{Max: qty("5Gi"), Raw: "0,5Gi"}}, Action: skip},
				{Conditions: Conditions{Capacity: &CapacityRange{Min: qty("5Gi"), Raw: "5Gi,0"}}, Action: skip},
			}},
		},
		{
			name: "storage classes; a numeric name needs no quotes",
			doc:  rule("- conditions:\n    storageClass: [gold, \"silver\", 123]\n  action: {type: snapshot}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{StorageClass: []string{"gold", "silver", "123"}},
				Action:     Action{Type: Snapshot},
			}}},
		},
		{
			name: "nfs {} and nfs with server and path",
			doc: rule("- conditions: {nfs: {}}\n  action: {type: skip}\n" +
				"- conditions:\n    nfs: {server: 192.168.200.90, path: /mnt/data}\n  action: {type: fs-backup}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{
				{Conditions: Conditions{NFS: &NFSCondition{}}, Action: skip},
				{Conditions: Conditions{NFS: &NFSCondition{Server: "192.168.200.90", Path: "/mnt/data"}}, Action: Action{Type: FSBackup}},
			}},
		},
		{
			name: "csi {}, csi driver, csi driver with volume attributes",
			doc: rule("- conditions: {csi: {}}\n  action: {type: snapshot}\n" +
				"- conditions: {csi: {driver: ebs.csi.aws.com}}\n  action: {type: snapshot}\n" +
				"- conditions:\n    csi:\n      driver: file.csi.azure.com\n      volumeAttributes: {protocol: nfs, replicas: 3}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{
				{Conditions: Conditions{CSI: &CSICondition{}}, Action: Action{Type: Snapshot}},
				{Conditions: Conditions{CSI: &CSICondition{Driver: "ebs.csi.aws.com"}}, Action: Action{Type: Snapshot}},
				{Conditions: Conditions{CSI: &CSICondition{Driver: "file.csi.azure.com",
					VolumeAttributes: map[string]string{"protocol": "nfs", "replicas": "3"}}}, Action: skip},
			}},
		},
		{
			name: "volume types",
			doc:  rule("- conditions:\n    volumeTypes: [emptyDir, downwardAPI, configMap, cinder, awsAzureDisk]\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{VolumeTypes: []VolumeType{VolumeEmptyDir, VolumeDownwardAPI, VolumeConfigMap, VolumeCinder, VolumeAWSAzureDisk}},
				Action:     skip,
			}}},
		},
		{
			name: "pvc labels, an empty value included",
			doc:  rule("- conditions:\n    pvcLabels:\n      environment: production\n      tier: 1\n      marker:\n  action: {type: snapshot}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{PVCLabels: map[string]string{"environment": "production", "tier": "1", "marker": ""}},
				Action:     Action{Type: Snapshot},
			}}},
		},
		{
			name: "pvc phases",
			doc:  rule("- conditions:\n    pvcPhase: [Pending, Lost]\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{PVCPhase: []corev1.PersistentVolumeClaimPhase{corev1.ClaimPending, corev1.ClaimLost}},
				Action:     skip,
			}}},
		},
		{
			name: "all conditions in one rule",
			doc: rule(`- conditions:
    capacity: "10,100Gi"
    storageClass: [gp2]
    nfs: {server: nas}
    csi: {driver: ebs.csi.aws.com}
    volumeTypes: [csi]
    pvcLabels: {app: db}
    pvcPhase: [Bound]
  action:
    type: fs-backup
`),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{
				Conditions: Conditions{
					Capacity:     &CapacityRange{Min: qty("10"), Max: qty("100Gi"), Raw: "10,100Gi"},
					StorageClass: []string{"gp2"},
					NFS:          &NFSCondition{Server: "nas"},
					CSI:          &CSICondition{Driver: "ebs.csi.aws.com"},
					VolumeTypes:  []VolumeType{VolumeCSI},
					PVCLabels:    map[string]string{"app": "db"},
					PVCPhase:     []corev1.PersistentVolumeClaimPhase{corev1.ClaimBound},
				},
				Action: Action{Type: FSBackup},
			}}},
		},
		{
			name: "every action; custom parameters keep YAML's types, nested maps and lists included",
			doc: rule(`- conditions: {storageClass: [a]}
  action: {type: snapshot}
- conditions: {storageClass: [b]}
  action: {type: fs-backup}
- conditions: {storageClass: [c]}
  action: {type: skip, parameters: {}}
- conditions: {storageClass: [d]}
  action:
    type: custom
    parameters:
      myCustomAction: true
      retries: 3
      ratio: 0.5
      big: 12345678901
      name: vault
      quoted: "42"
      nothing: null
      when: 2026-03-01
      targets: [s3, 7, {region: eu-west-1, zones: [a, b]}]
      nested: {level: {deeper: [1, 2.5, false]}}
- conditions: {storageClass: [e]}
  action: {type: custom}
`),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{
				{Conditions: Conditions{StorageClass: []string{"a"}}, Action: Action{Type: Snapshot}},
				{Conditions: Conditions{StorageClass: []string{"b"}}, Action: Action{Type: FSBackup}},
				{Conditions: Conditions{StorageClass: []string{"c"}}, Action: Action{Type: Skip, Parameters: map[string]any{}}},
				{Conditions: Conditions{StorageClass: []string{"d"}}, Action: Action{Type: Custom, Parameters: map[string]any{
					"myCustomAction": true,
					"retries":        3,
					"ratio":          0.5,
					"big":            12345678901,
					"name":           "vault",
					"quoted":         "42",
					"nothing":        nil,
					"when":           "2026-03-01",
					"targets":        []any{"s3", 7, map[string]any{"region": "eu-west-1", "zones": []any{"a", "b"}}},
					"nested":         map[string]any{"level": map[string]any{"deeper": []any{1, 2.5, false}}},
				}}},
				{Conditions: Conditions{StorageClass: []string{"e"}}, Action: Action{Type: Custom}},
			}},
		},
		{
			name: "include/exclude policy, empty lists allowed",
			doc: `version: v1
includeExcludePolicy:
  includedClusterScopedResources: [crd, pv]
  excludedClusterScopedResources: []
  includedNamespaceScopedResources: [pod, service, deployment, pvc]
  excludedNamespaceScopedResources: [configmap, secret]
`,
			want: &Policies{Version: "v1", IncludeExcludePolicy: &IncludeExcludePolicy{
				IncludedClusterScopedResources:   []string{"crd", "pv"},
				IncludedNamespaceScopedResources: []string{"pod", "service", "deployment", "pvc"},
				ExcludedNamespaceScopedResources: []string{"configmap", "secret"},
			}},
		},
		{
			name: "anchors and aliases resolve",
			doc: rule(`- conditions: {storageClass: &classes [gold, silver]}
  action: &snap {type: snapshot}
- conditions: {storageClass: *classes, pvcPhase: [Pending]}
  action: *snap
`),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{
				{Conditions: Conditions{StorageClass: []string{"gold", "silver"}}, Action: Action{Type: Snapshot}},
				{Conditions: Conditions{StorageClass: []string{"gold", "silver"},
					PVCPhase: []corev1.PersistentVolumeClaimPhase{corev1.ClaimPending}}, Action: Action{Type: Snapshot}},
			}},
		},
		{
			name: "null and empty condition lists do not constrain, as in Velero",
			doc:  rule("- conditions: {storageClass: [], volumeTypes: , pvcLabels: {}}\n  action: {type: skip}\n"),
			want: &Policies{Version: "v1", VolumePolicies: []VolumePolicy{{Action: skip}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !equality.Semantic.DeepEqual(got, tt.want) {
				gj, _ := json.MarshalIndent(got, "", " ")
				wj, _ := json.MarshalIndent(tt.want, "", " ")
				t.Errorf("got\n%s\nwant\n%s", gj, wj)
			}
		})
	}
}

func TestParseVeleroDocumentationExample(t *testing.T) {
	// The template from Velero's resource-filtering page, with its
	// "configmap" volume type spelled as Velero's code spells it.
	doc := `# currently only supports v1 version
version: v1
includeExcludePolicy:
  includedClusterScopedResources:
    - "crd"
    - "pv"
  excludedClusterScopedResources: []
  includedNamespaceScopedResources:
    - "pod"
    - "service"
    - "deployment"
    - "pvc"
  excludedNamespaceScopedResources:
    - "configmap"
    - "secret"
volumePolicies:
- conditions:
    capacity: "10,100Gi"
    csi:
      driver: ebs.csi.aws.com
    storageClass:
      - gp2
      - standard
    pvcPhase:
      - Pending
  action:
    type: skip
- conditions:
    capacity: "0,100Gi"
    nfs:
      server: 192.168.200.90
      path: /mnt/data
  action:
    type: skip
- conditions:
    nfs:
      server: 192.168.200.90
  action:
    type: fs-backup
- conditions:
    nfs: {}
  action:
    type: skip
- conditions:
    csi: {}
  action:
    type: snapshot
- conditions:
    volumeTypes:
      - emptyDir
      - downwardAPI
      - configMap
      - cinder
  action:
    type: skip
`
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.VolumePolicies) != 6 || p.IncludeExcludePolicy == nil {
		t.Fatalf("got %d volume policies, include/exclude %v", len(p.VolumePolicies), p.IncludeExcludePolicy)
	}
}

func TestFromConfigMap(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "volume-policy"}, Data: data}
	}
	t.Run("one key, any name", func(t *testing.T) {
		p, err := FromConfigMap(cm(map[string]string{"whatever.yaml": rule("- action: {type: skip}\n")}))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.VolumePolicies) != 1 || p.VolumePolicies[0].Action.Type != Skip {
			t.Errorf("got %+v", p)
		}
	})
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want []string
	}{
		{
			name: "no keys",
			cm:   cm(nil),
			want: []string{"ConfigMap velero/volume-policy: data: has no keys; a resource policy ConfigMap holds exactly one data key whose value is the policy YAML"},
		},
		{
			name: "two keys are named",
			cm:   cm(map[string]string{"b.yaml": "version: v1", "a.yaml": "version: v1"}),
			want: []string{"ConfigMap velero/volume-policy: data: has 2 keys (a.yaml, b.yaml); a resource policy ConfigMap holds exactly one data key whose value is the policy YAML"},
		},
		{
			name: "binary data is not read",
			cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "volume-policy"},
				BinaryData: map[string][]byte{"policy.yaml": []byte("version: v1")}},
			want: []string{"ConfigMap velero/volume-policy: data: has no keys (binaryData is not read); a resource policy ConfigMap holds exactly one data key whose value is the policy YAML"},
		},
		{
			name: "problems in the value name the ConfigMap",
			cm:   cm(map[string]string{"policy.yaml": "version: v2\nvolumePolicies:\n- action: {type: archive}\n"}),
			want: []string{
				`ConfigMap velero/volume-policy: version: "v2" is not supported; use v1`,
				`ConfigMap velero/volume-policy: volumePolicies[0].action.type: "archive" is not an action; use snapshot, fs-backup, skip or custom`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := FromConfigMap(tt.cm)
			if p != nil {
				t.Errorf("got policies %+v with an invalid ConfigMap", p)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			if got := ve.Messages(); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
	if _, err := FromConfigMap(nil); err == nil {
		t.Error("a nil ConfigMap was accepted")
	}
}
