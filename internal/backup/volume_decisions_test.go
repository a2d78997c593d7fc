package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// recordingSnapshotter knows CSI and hostPath volumes and records the
// snapshots it was asked for.
type recordingSnapshotter struct {
	mu      sync.Mutex
	config  map[string]string
	volumes []string
}

func (s *recordingSnapshotter) Init(config map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = config
	return nil
}
func (s *recordingSnapshotter) CreateVolumeFromSnapshot(string, string, string, *int64) (string, error) {
	return "", fmt.Errorf("not used")
}
func (s *recordingSnapshotter) GetVolumeInfo(string, string) (string, *int64, error) {
	return "fake-type", nil, nil
}
func (s *recordingSnapshotter) CreateSnapshot(volumeID, _ string, tags map[string]string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.volumes = append(s.volumes, volumeID+"@"+tags["velero.io/pv"])
	return "snap-" + volumeID, nil
}
func (s *recordingSnapshotter) DeleteSnapshot(string) error { return nil }
func (s *recordingSnapshotter) GetVolumeID(pv runtime.Unstructured) (string, error) {
	u := pv.UnstructuredContent()
	if h, ok, _ := unstructured.NestedString(u, "spec", "csi", "volumeHandle"); ok {
		return h, nil
	}
	p, _, _ := unstructured.NestedString(u, "spec", "hostPath", "path")
	return p, nil
}
func (s *recordingSnapshotter) SetVolumeID(pv runtime.Unstructured, _ string) (runtime.Unstructured, error) {
	return pv, nil
}

// claimsClassA claims the custom action of claims of storage class
// custom-a, as a plugin asking the VolumeHelper would.
type claimsClassA struct{}

func (claimsClassA) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, nil
}

// veleroStyle stands for a plugin built on Velero's SDK: its selector
// takes the claims of class custom-c, and it cannot set Lifeboat's
// claimed-by annotation.
type veleroStyle struct{}

func (veleroStyle) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}, LabelSelector: "storage-class=custom-c"}, nil
}
func (veleroStyle) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	return item, nil, nil
}
func (claimsClassA) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	if class, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName"); class == "custom-a" {
		volumehelper.MarkClaimed(u, "example.io/custom-a")
	}
	return u, nil, nil
}

const mixedPolicy = `version: v1
volumePolicies:
- conditions: {storageClass: [bronze]}
  action: {type: skip}
- conditions: {storageClass: [custom-a]}
  action: {type: custom, parameters: {plugin: a}}
- conditions: {storageClass: [custom-b]}
  action: {type: custom, parameters: {plugin: b}}
- conditions: {storageClass: [custom-c]}
  action: {type: custom, parameters: {plugin: c}}
- conditions: {csi: {driver: fast.csi.example.io}}
  action: {type: snapshot}
`

// createVolume creates a PV and a claim bound to it in ns.
func createVolume(t *testing.T, cs kubernetes.Interface, ns, name, class string, src corev1.PersistentVolumeSource) {
	t.Helper()
	ctx := context.Background()
	pvName := ns + "-" + name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource:        src,
			StorageClassName:              class,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"storage-class": class}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: &class,
			VolumeName:       pvName,
		},
	}
	created, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No controller binds claims here; say it is bound, as it would be.
	created.Status.Phase = corev1.ClaimBound
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestVolumeDecisions(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	policyName := f.ns + "-policy"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: policyName}, Data: map[string]string{"policy.yaml": mixedPolicy}})
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: f.ns + "-creds"}, Data: map[string][]byte{"cloud": []byte("key=" + f.ns)}})
	mustCreate(t, c, &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: f.ns + "-snaps"},
		Spec: v1.VolumeSnapshotLocationSpec{
			Provider: "fake.io/snapshots", Config: map[string]string{"where": "here"},
			Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: f.ns + "-creds"}, Key: "cloud"},
		},
	})
	creds, err := credentials.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Close()
	f.engine.SnapshotLocations = &locations.Resolver{Client: c, SecretReader: c, Namespace: "velero", Credentials: creds}

	csi := func(handle string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "fast.csi.example.io", VolumeHandle: handle}}
	}
	hostPath := func(p string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}
	}
	createVolume(t, cs, f.ns, "gold", "gold", csi("vol-gold"))
	createVolume(t, cs, f.ns, "silver", "silver", hostPath("/data/silver"))
	createVolume(t, cs, f.ns, "bronze", "bronze", csi("vol-bronze"))
	createVolume(t, cs, f.ns, "custom-a", "custom-a", csi("vol-a"))
	createVolume(t, cs, f.ns, "custom-b", "custom-b", csi("vol-b"))
	createVolume(t, cs, f.ns, "custom-c", "custom-c", csi("vol-c"))
	mustCreate(t, c, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web", Annotations: map[string]string{volumehelper.VolumesToBackupAnnotation: "cache"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "example"}},
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gold"}}},
			},
		},
	})

	snapshotter := &recordingSnapshotter{}
	f.engine.Plugins = fakePlugins{
		v1:           map[string]api.BackupItemAction{"example.io/custom-a": claimsClassA{}, "example.io/velero-style": veleroStyle{}},
		snapshotters: map[string]api.VolumeSnapshotter{"fake.io/snapshots": snapshotter},
	}
	b := f.backup("volumes")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: policyName}
	locs, msgs := ValidateVolumes(ctx, c, b)
	if len(msgs) > 0 || !slices.Contains(locs, f.ns+"-snaps") {
		t.Fatalf("ValidateVolumes: locations %v, problems %v", locs, msgs)
	}
	b.Spec.VolumeSnapshotLocations = []string{f.ns + "-snaps"}

	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed", out)
	}

	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, "volumes")
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		action  string
		rule    int // -1: fallback
		skipped bool
		claimed string
		handled string // the actions that ran on a custom volume
	}
	wants := map[string]want{
		"pv " + f.ns + "-gold":     {"snapshot", 4, false, "", ""},
		"pv " + f.ns + "-silver":   {"snapshot", -1, false, "", ""},
		"pv " + f.ns + "-bronze":   {"skip", 0, true, "", ""},
		"pv " + f.ns + "-custom-a": {"custom", 1, false, "example.io/custom-a", ""},
		// custom-a's action ran on it but claimed only custom-a: declined.
		"pv " + f.ns + "-custom-b": {"custom", 2, true, "", ""},
		// Handled by an action that cannot set the annotation.
		"pv " + f.ns + "-custom-c": {"custom", 3, false, "", "example.io/velero-style"},
		"pod web:cache":            {"fs-backup", -1, true, "", ""},
		"pod web:tmp":              {"skip", -1, true, "", ""},
	}
	got := map[string]volumefiles.BackupVolumeInfo{}
	for _, in := range infos {
		key := "pv " + in.PVName
		if in.PVBInfo != nil {
			key = "pod " + in.PVBInfo.PodName + ":" + in.PVBInfo.VolumeName
		}
		got[key] = in
	}
	for key, w := range wants {
		in, ok := got[key]
		if !ok || in.Decision == nil {
			t.Errorf("%s: no volume info (have %v)", key, keysOf(got))
			continue
		}
		rule := -1
		if in.Decision.Rule != nil {
			rule = *in.Decision.Rule
		}
		handled := strings.Join(in.Decision.HandledBy, ",")
		if in.Decision.Action != w.action || rule != w.rule || in.Skipped != w.skipped || in.Decision.ClaimedBy != w.claimed || handled != w.handled {
			t.Errorf("%s: action %s rule %d skipped %v claimedBy %q handledBy %q (%s); want %+v", key, in.Decision.Action, rule, in.Skipped, in.Decision.ClaimedBy, handled, in.SkippedReason, w)
		}
	}
	if len(infos) != len(wants) {
		t.Errorf("%d volume infos, want %d: %v", len(infos), len(wants), keysOf(got))
	}
	if g := got["pv "+f.ns+"-gold"]; g.PVCName != "gold" || g.PVCNamespace != f.ns || g.NativeSnapshotInfo == nil || g.NativeSnapshotInfo.SnapshotHandle != "snap-vol-gold" || g.NativeSnapshotInfo.VolumeAZ != "zone-a" {
		t.Errorf("gold's info %+v lacks its claim or snapshot", g)
	}

	snaps, err := volumefiles.GetSnapshots(ctx, f.store, "volumes")
	if err != nil {
		t.Fatal(err)
	}
	var taken []string
	for _, s := range snaps {
		if s.Spec.Location != f.ns+"-snaps" || s.Status.Phase != volumefiles.SnapshotPhaseCompleted || s.Spec.BackupName != "volumes" {
			t.Errorf("snapshot %+v", s)
		}
		taken = append(taken, s.Spec.PersistentVolumeName+"="+s.Status.ProviderSnapshotID)
	}
	slices.Sort(taken)
	if w := []string{f.ns + "-gold=snap-vol-gold", f.ns + "-silver=snap-/data/silver"}; !slices.Equal(taken, w) {
		t.Errorf("snapshots %v, want %v", taken, w)
	}
	if out.VolumeSnapshotsAttempted != 2 || out.VolumeSnapshotsCompleted != 2 {
		t.Errorf("outcome counts %d snapshots attempted, %d completed; want 2 and 2", out.VolumeSnapshotsAttempted, out.VolumeSnapshotsCompleted)
	}
	stored := &v1.Backup{}
	meta, err := f.store.GetBackupMetadata(ctx, "volumes")
	if err == nil {
		err = json.Unmarshal(meta, stored)
	}
	if err != nil {
		t.Fatalf("reading velero-backup.json: %v", err)
	}
	if stored.Status.VolumeSnapshotsAttempted != 2 || stored.Status.VolumeSnapshotsCompleted != 2 {
		t.Errorf("velero-backup.json counts %d snapshots attempted, %d completed; want 2 and 2",
			stored.Status.VolumeSnapshotsAttempted, stored.Status.VolumeSnapshotsCompleted)
	}
	if snapshotter.config["where"] != "here" {
		t.Errorf("the snapshotter was not initialised with the location's config: %v", snapshotter.config)
	}
	// The snapshots were taken with the location's credentials.
	if got, err := os.ReadFile(snapshotter.config["credentialsFile"]); err != nil || string(got) != "key="+f.ns {
		t.Errorf("the snapshotter's credentialsFile %q holds %q (%v), want the location's secret", snapshotter.config["credentialsFile"], got, err)
	}

	var res results.Results
	if err := f.store.GetGzipJSON(ctx, f.store.BackupKey("volumes", storage.BackupResultsFile("volumes")), &res); err != nil {
		t.Fatal(err)
	}
	warnings := strings.Join(res.Warnings.Namespaces[f.ns], "\n")
	for _, w := range []string{"custom-b", "custom action not handled: no backup item action applies", "web:cache", "fs-backup reads a running pod's volumes"} {
		if !strings.Contains(warnings, w) {
			t.Errorf("warnings %q do not mention %q", warnings, w)
		}
	}
	if strings.Contains(warnings, "custom-a") || strings.Contains(warnings, "custom-c") {
		t.Errorf("a handled custom volume was warned about: %q", warnings)
	}

	// The claims' PVs are in the archive, stored once, though the backup
	// names only the namespace.
	items := readItems(t, f, "volumes")
	for _, name := range []string{"gold", "silver", "bronze", "custom-a", "custom-b", "custom-c"} {
		if items["resources/persistentvolumes/cluster/"+f.ns+"-"+name+".json"] == nil {
			t.Errorf("PersistentVolume of claim %s not in the archive", name)
		}
	}
}

func TestVolumeValidation(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bad := f.ns + "-bad"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: bad}, Data: map[string]string{"p": "version: v1\nvolumePolicies:\n- conditions: {capacity: \"lots\"}\n  action: {type: snapshot}\n- conditions: {}\n  action: {type: teleport}\n"}})
	b := f.backup("invalid")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: bad}
	b.Spec.VolumeSnapshotLocations = []string{"nowhere"}
	_, msgs := ValidateVolumes(ctx, c, b)
	all := strings.Join(msgs, "\n")
	for _, w := range []string{"spec.resourcePolicy", "volumePolicies[0].conditions.capacity", "volumePolicies[1].action.type", "spec.volumeSnapshotLocations: VolumeSnapshotLocation \"nowhere\" not found"} {
		if !strings.Contains(all, w) {
			t.Errorf("validation messages do not mention %q:\n%s", w, all)
		}
	}
}

func mustCreate(t *testing.T, c crclient.Client, obj crclient.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
