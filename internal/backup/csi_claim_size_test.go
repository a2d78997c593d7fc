package backup

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestStoredSnapshottedClaimAsksForTheVolumesCapacity(t *testing.T) {
	claim := func(request string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Name, pvc.Namespace = "data", "shop"
		if request != "" {
			pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}
		}
		return pvc
	}
	volume := func(capacity string) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{}
		if capacity != "" {
			pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		return pv
	}
	for _, tc := range []struct {
		name, request, capacity, want string
	}{
		{"rounded up by the provisioner", "1500Mi", "2Gi", "2Gi"},
		{"no request", "", "1Gi", "1Gi"},
		{"request equals capacity", "1Gi", "1Gi", "1Gi"},
		{"request larger than capacity", "3Gi", "2Gi", "3Gi"},
		{"capacity unknown", "1500Mi", "", "1500Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := claim(tc.request)
			data, err := json.Marshal(pvc)
			if err != nil {
				t.Fatal(err)
			}
			out, err := raiseRequestToCapacity(data, pvc, volume(tc.capacity))
			if err != nil {
				t.Fatal(err)
			}
			var stored corev1.PersistentVolumeClaim
			if err := json.Unmarshal(out, &stored); err != nil {
				t.Fatal(err)
			}
			got := stored.Spec.Resources.Requests[corev1.ResourceStorage]
			if got.String() != tc.want && !(tc.want == "" && got.IsZero()) {
				t.Errorf("stored request %s, want %s", got.String(), tc.want)
			}
			if stored.Name != "data" || stored.Namespace != "shop" {
				t.Errorf("stored claim %s/%s: the rest of the claim must be kept", stored.Namespace, stored.Name)
			}
		})
	}
}
