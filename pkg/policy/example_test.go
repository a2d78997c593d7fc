package policy_test

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// A policy is parsed and validated in one step; then each volume is
// matched against it, and the first volume policy whose conditions all
// hold decides.
func Example() {
	p, err := policy.Parse([]byte(`
version: v1
volumePolicies:
- conditions:
    csi: {driver: array.csi.example.com}
  action:
    type: custom
    parameters: {handler: example.io/array, tier: 1}
- conditions:
    capacity: "0,10Gi"
    storageClass: [gold]
  action: {type: snapshot}
- conditions:
    volumeTypes: [hostPath, emptyDir]
  action: {type: skip}
`))
	if err != nil {
		fmt.Println(err)
		return
	}

	class := "gold"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"},
			},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data"},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: "pv-1"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}

	// MatchAction is what a backup asks for every volume: it does not
	// allocate.
	index, action := p.MatchAction(policy.VolumeFromPV(pv, pvc))
	fmt.Printf("volumePolicies[%d]: %s\n", index, action.Type)

	// Match says why, as `lifeboat policy explain` does.
	m := p.Match(policy.VolumeFromPV(pv, pvc))
	for _, r := range m.Rejected {
		fmt.Println("rejected", r)
	}
	for _, c := range m.Matched {
		fmt.Println("matched", c)
	}
	// Output:
	// volumePolicies[1]: snapshot
	// rejected volumePolicies[0]: csi: driver "ebs.csi.aws.com" is not "array.csi.example.com"
	// matched capacity: 5Gi in "0,10Gi"
	// matched storageClass: "gold" in [gold]
}

// A policy with mistakes is refused as a whole, with every problem named
// by its field, so all of them can be fixed in one go.
func ExampleParse_invalid() {
	_, err := policy.Parse([]byte(`
version: v1
volumePolicies:
- conditions: {capacity: "ten gigs"}
  action: {type: snapshot}
- conditions: {storageClass: [gold]}
  action: {type: copy}
`))
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Printf("line %d: %s\n", p.Line, p)
		}
	}
	// Output:
	// line 4: volumePolicies[0].conditions.capacity: "ten gigs": write "lower,upper" with Kubernetes quantities, either side may be empty (e.g. "10Gi,100Gi", ",5Gi", "1Ti,")
	// line 7: volumePolicies[1].action.type: "copy" is not an action; use snapshot, fs-backup, skip or custom
}

// A resource policy usually arrives as the ConfigMap a Backup names in
// spec.resourcePolicy; its errors then name the ConfigMap.
func ExampleFromConfigMap() {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "volume-policy"},
		Data: map[string]string{"policy.yaml": `
version: v1
volumePolicies:
- conditions: {nfs: {server: nfs.example.com}}
  action: {type: fs-backup}
`},
	}
	p, err := policy.FromConfigMap(cm)
	if err != nil {
		fmt.Println(err)
		return
	}
	nfs := policy.VolumeFromPodVolume(corev1.Volume{
		Name:         "shared",
		VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports/shop"}},
	}, nil, nil)
	index, action := p.MatchAction(nfs)
	fmt.Println(index, action.Type)

	cm.Data["second"] = "version: v1"
	_, err = policy.FromConfigMap(cm)
	fmt.Println(err)
	// Output:
	// 0 fs-backup
	// ConfigMap velero/volume-policy: data: has 2 keys (policy.yaml, second); a resource policy ConfigMap holds exactly one data key whose value is the policy YAML
}
