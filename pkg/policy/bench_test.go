package policy

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// benchVolumes returns n volumes spread over every rule of mixedPolicy and
// over volumes no rule matches, so each MatchAction walks several rules.
func benchVolumes(n int) []VolumeInfo {
	classes := []string{"scratch", "gold", "silver", "bronze", ""}
	drivers := []string{"ebs.csi.aws.com", "vault.example.com", "efs.csi.aws.com"}
	out := make([]VolumeInfo, n)
	for i := range out {
		var v VolumeInfo
		switch i % 4 {
		case 0, 1:
			v.Type = VolumeCSI
			v.CSIDriver = drivers[i%len(drivers)]
			v.CSIVolumeAttributes = map[string]string{"fsType": "ext4"}
		case 2:
			v.Type = VolumeNFS
			v.NFSServer, v.NFSPath = "nas", fmt.Sprintf("/export/%d", i)
		case 3:
			v.Type = VolumeEmptyDir
		}
		if v.Type != VolumeEmptyDir {
			q := resource.NewQuantity(int64(i%300+1)<<30, resource.BinarySI)
			v.Capacity = q
			v.StorageClass = classes[i%len(classes)]
			v.PVC = fmt.Sprintf("ns%d/pvc%d", i%20, i)
			v.PVCPhase = corev1.ClaimBound
			v.PVCLabels = map[string]string{"app": fmt.Sprintf("app%d", i%7)}
			if i%3 == 0 {
				v.PVCLabels["backup"] = "vault"
			}
		}
		out[i] = v
	}
	return out
}

// BenchmarkMatch times MatchAction over 10,000 volumes; one op is the whole
// set, and ns/volume is reported alongside.
func BenchmarkMatch(b *testing.B) {
	p := mustParse(b, mixedPolicy)
	vols := benchVolumes(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, v := range vols {
			p.MatchAction(v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(vols)), "ns/volume")
}

// BenchmarkMatchExplained is the same with explanations, the cost `policy
// explain` pays.
func BenchmarkMatchExplained(b *testing.B) {
	p := mustParse(b, mixedPolicy)
	vols := benchVolumes(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, v := range vols {
			p.Match(v)
		}
	}
}
