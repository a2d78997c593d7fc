package backup

import (
	"context"
	"slices"
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
			ns, infos, warnings := backupWithoutLocations(t, tt.snapshotVolumes)
			if len(infos) != 2 {
				t.Fatalf("%d volume infos, want 2: %+v", len(infos), infos)
			}
			for _, in := range infos {
				if in.Decision == nil || in.Decision.Action != "snapshot" || !in.Skipped || in.SkippedReason != "no VolumeSnapshotLocation is configured" {
					t.Errorf("%s: %+v (decision %+v), want a snapshot not taken for want of a location", in.PVCName, in, in.Decision)
				}
			}
			for _, claim := range []string{"gold", "silver"} {
				want := slices.Contains(tt.warned, claim)
				if got := strings.Contains(warnings, "claim "+ns+"/"+claim+"): snapshot not taken"); got != want {
					t.Errorf("%s warned about: %v, want %v; warnings:\n%s", claim, got, want, warnings)
				}
			}
		})
	}
}

// backupWithoutLocations backs up a namespace with two claims, gold (a
// volume policy chooses snapshot) and silver (no rule matches), and no
// VolumeSnapshotLocation. It returns the namespace, the volume information
// and the namespace's warnings.
func backupWithoutLocations(t *testing.T, snapshotVolumes *bool) (string, []volumefiles.BackupVolumeInfo, string) {
	t.Helper()
	f := newFixture(t, 0)
	c := f.engine.Client
	cs := kubernetes.NewForConfigOrDie(cfg)
	policyName := f.ns + "-policy"
	createVolume(t, cs, f.ns, "gold", "gold", corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "fast.csi.example.io", VolumeHandle: "vol-gold"}})
	createVolume(t, cs, f.ns, "silver", "silver", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/silver"}})
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: policyName}, Data: map[string]string{"policy.yaml": mixedPolicy}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	f.engine.Plugins = fakePlugins{}

	b := f.backup("no-locations")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: policyName}
	b.Spec.SnapshotVolumes = snapshotVolumes
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed", out)
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	var res results.Results
	if err := f.store.GetGzipJSON(ctx, f.store.BackupKey(b.Name, storage.BackupResultsFile(b.Name)), &res); err != nil {
		t.Fatal(err)
	}
	return f.ns, infos, strings.Join(res.Warnings.Namespaces[f.ns], "\n")
}
