package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRejects(t *testing.T) {
	actions := "use snapshot, fs-backup, skip or custom"
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "empty document",
			doc:  "",
			want: []string{`the policy is empty; it starts with "version: v1"`},
		},
		{
			name: "only a comment",
			doc:  "# nothing here\n",
			want: []string{`the policy is empty; it starts with "version: v1"`},
		},
		{
			name: "not YAML",
			doc:  "version: v1\nvolumePolicies: [\n",
			want: []string{"not valid YAML: line 2: did not find expected node content"},
		},
		{
			name: "a list instead of a mapping",
			doc:  "- version: v1\n",
			want: []string{"the policy must be a mapping with the keys version, volumePolicies, includeExcludePolicy, namespacedFilterPolicies, clusterScopedFilterPolicy"},
		},
		{
			name: "two documents",
			doc:  "version: v1\n---\nversion: v1\n",
			want: []string{`the policy must be a single YAML document; remove everything after the first "---"`},
		},
		{
			name: "wrong version",
			doc:  "version: v2\n",
			want: []string{`version: "v2" is not supported; use v1`},
		},
		{
			name: "missing version",
			doc:  "volumePolicies: []\n",
			want: []string{"version: missing; use v1"},
		},
		{
			name: "version not a string",
			doc:  "version: {v: 1}\n",
			want: []string{"version: must be a string"},
		},
		{
			name: "unknown top-level key",
			doc:  "version: v1\nresourcePolicies: []\n",
			want: []string{"resourcePolicies: unknown key; allowed keys are version, volumePolicies, includeExcludePolicy, namespacedFilterPolicies, clusterScopedFilterPolicy"},
		},
		{
			name: "duplicate key",
			doc:  "version: v1\nversion: v1\n",
			want: []string{"version: appears twice (lines 1 and 2); keep one"},
		},
		{
			name: "volumePolicies not a list",
			doc:  "version: v1\nvolumePolicies: {action: {type: skip}}\n",
			want: []string{"volumePolicies: must be a list of {conditions, action}"},
		},
		{
			name: "unknown key in a volume policy",
			doc:  rule("- conditions: {}\n  action: {type: skip}\n  name: cheap\n"),
			want: []string{"volumePolicies[0].name: unknown key; allowed keys are conditions, action"},
		},
		{
			name: "unknown condition, with a hint when only the case differs",
			doc:  rule("- conditions: {storageclass: [gold], size: 5Gi}\n  action: {type: skip}\n"),
			want: []string{
				`volumePolicies[0].conditions.storageclass: unknown key; did you mean "storageClass"?`,
				"volumePolicies[0].conditions.size: unknown key; allowed keys are capacity, storageClass, nfs, csi, volumeTypes, pvcLabels, pvcPhase, pvcVolumeMode, pvcAccessModes",
			},
		},
		{
			name: "conditions not a mapping",
			doc:  rule("- conditions: [gold]\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions: must be a mapping with the keys capacity, storageClass, nfs, csi, volumeTypes, pvcLabels, pvcPhase, pvcVolumeMode, pvcAccessModes"},
		},
		{
			name: "unknown action",
			doc:  rule("- action: {type: archive}\n"),
			want: []string{`volumePolicies[0].action.type: "archive" is not an action; ` + actions},
		},
		{
			name: "action types are case-sensitive",
			doc:  rule("- action: {type: Skip}\n"),
			want: []string{`volumePolicies[0].action.type: "Skip" is not an action; ` + actions},
		},
		{
			name: "missing action",
			doc:  rule("- conditions: {nfs: {}}\n"),
			want: []string{"volumePolicies[0].action: missing; every volume policy needs an action with a type: snapshot, fs-backup, skip or custom"},
		},
		{
			name: "missing action type",
			doc:  rule("- action: {parameters: {a: 1}}\n"),
			want: []string{"volumePolicies[0].action.type: missing; " + actions},
		},
		{
			name: "unknown action key",
			doc:  rule("- action: {type: custom, params: {a: 1}}\n"),
			want: []string{"volumePolicies[0].action.params: unknown key; allowed keys are type, parameters"},
		},
		{
			name: "parameters not a mapping",
			doc:  rule("- action: {type: custom, parameters: [a, b]}\n"),
			want: []string{"volumePolicies[0].action.parameters: must be a mapping of names to values"},
		},
		{
			name: "duplicate parameter",
			doc:  rule("- action:\n    type: custom\n    parameters:\n      a: 1\n      a: 2\n"),
			want: []string{"volumePolicies[0].action.parameters.a: appears twice; keep one"},
		},
		{
			name: "capacity without a comma",
			doc:  rule("- conditions: {capacity: 5Gi}\n  action: {type: skip}\n"),
			want: []string{`volumePolicies[0].conditions.capacity: "5Gi": write "lower,upper" with Kubernetes quantities, either side may be empty (e.g. "10Gi,100Gi", ",5Gi", "1Ti,")`},
		},
		{
			name: "capacity with three parts",
			doc:  rule("- conditions: {capacity: \"1Gi,2Gi,3Gi\"}\n  action: {type: skip}\n"),
			want: []string{`volumePolicies[0].conditions.capacity: "1Gi,2Gi,3Gi": write "lower,upper" with Kubernetes quantities, either side may be empty (e.g. "10Gi,100Gi", ",5Gi", "1Ti,")`},
		},
		{
			name: "capacity with bad quantities reports each side",
			doc:  rule("- conditions: {capacity: \"10GB,lots\"}\n  action: {type: skip}\n"),
			want: []string{
				`volumePolicies[0].conditions.capacity: "10GB,lots": the lower bound "10GB" is not a Kubernetes quantity (e.g. 500Mi, 10Gi, 1Ti)`,
				`volumePolicies[0].conditions.capacity: "10GB,lots": the upper bound "lots" is not a Kubernetes quantity (e.g. 500Mi, 10Gi, 1Ti)`,
			},
		},
		{
			name: "capacity lower above upper",
			doc:  rule("- action: {type: skip}\n- action: {type: skip}\n- conditions: {capacity: \"10Gi,5Gi\"}\n  action: {type: skip}\n"),
			want: []string{`volumePolicies[2].conditions.capacity: "10Gi,5Gi": the lower bound is above the upper one`},
		},
		{
			name: "capacity not a string",
			doc:  rule("- conditions: {capacity: [1Gi, 2Gi]}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.capacity: must be a string"},
		},
		{
			name: "storageClass not a list",
			doc:  rule("- conditions: {storageClass: gold}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.storageClass: must be a list of strings"},
		},
		{
			name: "storageClass item not a string",
			doc:  rule("- conditions: {storageClass: [gold, {name: silver}]}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.storageClass[1]: must be a string"},
		},
		{
			name: "nfs unknown key",
			doc:  rule("- conditions: {nfs: {host: nas}}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.nfs.host: unknown key; allowed keys are server, path"},
		},
		{
			name: "csi volumeAttributes without a driver",
			doc:  rule("- conditions: {csi: {volumeAttributes: {protocol: nfs}}}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.csi.volumeAttributes: needs csi.driver; volume attributes are only meaningful for one driver"},
		},
		{
			name: "csi volumeAttributes not a mapping",
			doc:  rule("- conditions: {csi: {driver: d, volumeAttributes: [protocol]}}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.csi.volumeAttributes: must be a mapping of names to strings"},
		},
		{
			name: "csi unknown key",
			doc:  rule("- conditions: {csi: {driver: d, fsType: ext4}}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.csi.fsType: unknown key; allowed keys are driver, volumeAttributes"},
		},
		{
			name: "pvcLabels not a mapping",
			doc:  rule("- conditions: {pvcLabels: [app=db]}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.pvcLabels: must be a mapping of names to strings"},
		},
		{
			name: "pvcLabels value not a string",
			doc:  rule("- conditions: {pvcLabels: {app: [db]}}\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.pvcLabels.app: must be a string"},
		},
		{
			name: "includeExcludePolicy unknown key",
			doc:  "version: v1\nincludeExcludePolicy:\n  includedResources: [pods]\n",
			want: []string{"includeExcludePolicy.includedResources: unknown key; allowed keys are includedClusterScopedResources, " +
				"excludedClusterScopedResources, includedNamespaceScopedResources, excludedNamespaceScopedResources"},
		},
		{
			name: "overlapping include and exclude names both fields",
			doc: `version: v1
includeExcludePolicy:
  includedClusterScopedResources: [crd, pv]
  excludedClusterScopedResources: [pv]
  includedNamespaceScopedResources: [pods, secrets]
  excludedNamespaceScopedResources: [secrets, events, pods]
`,
			want: []string{
				`includeExcludePolicy.excludedClusterScopedResources[0]: "pv" is also in includeExcludePolicy.includedClusterScopedResources; a resource is either included or excluded`,
				`includeExcludePolicy.excludedNamespaceScopedResources[0]: "secrets" is also in includeExcludePolicy.includedNamespaceScopedResources; a resource is either included or excluded`,
				`includeExcludePolicy.excludedNamespaceScopedResources[2]: "pods" is also in includeExcludePolicy.includedNamespaceScopedResources; a resource is either included or excluded`,
			},
		},
		{
			name: "a resource in the other scope's list is no overlap",
			doc:  "version: v1\nincludeExcludePolicy:\n  includedClusterScopedResources: [pv]\n  excludedNamespaceScopedResources: [pv]\n",
		},
		{
			name: "wildcards are refused in includeExcludePolicy",
			doc:  "version: v1\nincludeExcludePolicy:\n  includedNamespaceScopedResources: ['*']\n  excludedClusterScopedResources: ['*']\n",
			want: []string{
				`includeExcludePolicy.includedNamespaceScopedResources[0]: "*" is not allowed in includeExcludePolicy; list the resources by name`,
				`includeExcludePolicy.excludedClusterScopedResources[0]: "*" is not allowed in includeExcludePolicy; list the resources by name`,
			},
		},
		{
			name: "every problem of a document, top down",
			doc: `version: v3
volumePolicies:
- conditions:
    capacity: "10Gi,5Gi"
    csi: {volumeAttributes: {protocol: nfs}}
  action: {type: snapshot}
- conditions:
    pvcPhase: [Done]
    color: blue
  action: {type: archive}
includeExcludePolicy:
  includedClusterScopedResources: [pv]
  excludedClusterScopedResources: [pv]
`,
			want: []string{
				`version: "v3" is not supported; use v1`,
				`volumePolicies[0].conditions.capacity: "10Gi,5Gi": the lower bound is above the upper one`,
				"volumePolicies[0].conditions.csi.volumeAttributes: needs csi.driver; volume attributes are only meaningful for one driver",
				"volumePolicies[1].conditions.color: unknown key; allowed keys are capacity, storageClass, nfs, csi, volumeTypes, pvcLabels, pvcPhase, pvcVolumeMode, pvcAccessModes",
				`volumePolicies[1].action.type: "archive" is not an action; ` + actions,
				`includeExcludePolicy.excludedClusterScopedResources[0]: "pv" is also in includeExcludePolicy.includedClusterScopedResources; a resource is either included or excluded`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.doc))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if p != nil {
				t.Errorf("returned policies along with the error")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%T is not a *ValidationError", err)
			}
			got := ve.Messages()
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Error() does not join the messages: %q", err.Error())
			}
		})
	}
}

func TestFieldErrorsCarryFieldAndLine(t *testing.T) {
	_, err := Parse([]byte(rule("- conditions:\n    capacity: \"10Gi,5Gi\"\n  action: {type: skip}\n")))
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As found no *FieldError in %v", err)
	}
	want := FieldError{Field: "volumePolicies[0].conditions.capacity", Message: `"10Gi,5Gi": the lower bound is above the upper one`, Line: 4}
	if *fe != want {
		t.Errorf("got %+v, want %+v", *fe, want)
	}
}

// What Velero accepts is valid here too; where it is most likely a mistake
// the policy carries a warning naming the field and the fix.
func TestParseWarns(t *testing.T) {
	rule := func(rules string) string { return "version: v1\nvolumePolicies:\n" + rules }
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "volume types are compared as written: Velero's own docs example has configmap",
			doc:  rule("- conditions: {volumeTypes: [emptyDir, configmap, persistentVolumeClaim]}\n  action: {type: skip}\n"),
			want: []string{
				`volumePolicies[0].conditions.volumeTypes[1]: "configmap" is not a volume type, so it never matches (names are case-sensitive); did you mean "configMap"?`,
				`volumePolicies[0].conditions.volumeTypes[2]: "persistentVolumeClaim" is not a volume type, so it never matches (names are case-sensitive); use one of ` +
					"awsAzureDisk, awsElasticBlockStore, azureDisk, azureFile, cephfs, cinder, configMap, csi, downwardAPI, emptyDir, " +
					"ephemeral, fc, flexVolume, flocker, gcePersistentDisk, gitRepo, glusterfs, hostPath, iscsi, local, nfs, " +
					"photonPersistentDisk, portworxVolume, projected, quobyte, rbd, scaleIO, secret, storageOS, vsphereVolume",
			},
		},
		{
			name: "pvcPhase takes any value",
			doc:  rule("- conditions: {pvcPhase: [Bound, bound, Released]}\n  action: {type: skip}\n"),
			want: []string{
				`volumePolicies[0].conditions.pvcPhase[1]: "bound" is not a PVC phase, so it never matches (phases are case-sensitive); did you mean "Bound"?`,
				`volumePolicies[0].conditions.pvcPhase[2]: "Released" is not a PVC phase, so it never matches (phases are case-sensitive); use Pending, Bound, Lost`,
			},
		},
		{
			name: "nfs with no value constrains nothing",
			doc:  rule("- conditions:\n    nfs:\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.nfs: has no value, so it does not constrain the volume (Velero reads it so too); write nfs: {} to match only NFS volumes, or remove the key"},
		},
		{
			name: "csi with no value constrains nothing",
			doc:  rule("- conditions:\n    csi:\n  action: {type: skip}\n"),
			want: []string{"volumePolicies[0].conditions.csi: has no value, so it does not constrain the volume (Velero reads it so too); write csi: {} to match only CSI volumes, or remove the key"},
		},
		{
			name: "negative capacity",
			doc:  rule("- conditions: {capacity: \"-1Gi,\"}\n  action: {type: skip}\n"),
			want: []string{`volumePolicies[0].conditions.capacity: "-1Gi,": the lower bound "-1Gi" is negative, and no volume is; write a bound of 0 or more`},
		},
		{
			name: "volume and access modes are compared as written",
			doc:  rule("- conditions: {pvcVolumeMode: block, pvcAccessModes: [RWO]}\n  action: {type: skip}\n"),
			want: []string{
				`volumePolicies[0].conditions.pvcVolumeMode: "block" is not a volume mode, so it never matches (modes are case-sensitive); did you mean "Block"?`,
				`volumePolicies[0].conditions.pvcAccessModes[0]: "RWO" is not an access mode, so the condition never matches (modes are case-sensitive); use ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod`,
			},
		},
		{
			name: "empty nfs, csi and capacity are quiet",
			doc:  rule("- conditions: {nfs: {}, csi: {}, capacity: \"\"}\n  action: {type: skip}\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := strings.Join(p.WarningMessages(), "\n"); got != strings.Join(tt.want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}
