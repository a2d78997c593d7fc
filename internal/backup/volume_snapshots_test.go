package backup

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// TestVolumeSnapshotNotTakenWarnings: a snapshot that cannot be taken (no
// VolumeSnapshotLocation) is a warning when someone chose it (a volume
// policy, or snapshotVolumes set to true), and quiet when it is only the
// default (snapshotVolumes unset); the volume information says why in
// every case.
func TestVolumeSnapshotNotTakenWarnings(t *testing.T) {
	ctx := context.Background()
	yes := true
	for _, tt := range []struct {
		name            string
		snapshotVolumes *bool
		warned          []string // the claims warned about
	}{
		{"snapshotVolumes unset", nil, []string{"gold"}},
		{"snapshotVolumes true", &yes, []string{"gold", "silver"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			c := f.engine.Client
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			policyName := f.ns + "-policy"
			mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: policyName}, Data: map[string]string{"policy.yaml": mixedPolicy}})
			cs := kubernetes.NewForConfigOrDie(cfg)
			// gold: snapshot by the CSI driver rule; silver: no rule matches.
			createVolume(t, cs, f.ns, "gold", "gold", corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "fast.csi.example.io", VolumeHandle: "vol-gold"}})
			createVolume(t, cs, f.ns, "silver", "silver", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/silver"}})
			f.engine.Plugins = fakePlugins{}

			b := f.backup("no-locations")
			b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: policyName}
			b.Spec.SnapshotVolumes = tt.snapshotVolumes
			out := f.engine.Run(ctx, b, f.store, nil)
			if out.Phase != v1.BackupPhaseCompleted {
				t.Fatalf("outcome %+v, want Completed", out)
			}

			infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 2 {
				t.Fatalf("%d volume infos, want 2: %+v", len(infos), infos)
			}
			for _, in := range infos {
				if in.Decision == nil || in.Decision.Action != "snapshot" || !in.Skipped || in.SkippedReason != "no VolumeSnapshotLocation is configured" {
					t.Errorf("%s: %+v (decision %+v), want a snapshot not taken for want of a location", in.PVCName, in, in.Decision)
				}
			}

			var res results.Results
			if err := f.store.GetGzipJSON(ctx, f.store.BackupKey(b.Name, storage.BackupResultsFile(b.Name)), &res); err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(res.Warnings.Namespaces[f.ns], "\n")
			for _, claim := range []string{"gold", "silver"} {
				want := false
				for _, w := range tt.warned {
					want = want || w == claim
				}
				if got := strings.Contains(warnings, "claim "+f.ns+"/"+claim+"): snapshot not taken"); got != want {
					t.Errorf("%s warned about: %v, want %v; warnings:\n%s", claim, got, want, warnings)
				}
			}
		})
	}
}
