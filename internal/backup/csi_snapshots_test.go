package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// The CSI tests run on an API server of their own that serves the
// snapshot kinds: served, they change what the other tests' backups of
// CSI volumes do.
var csiCluster struct {
	once sync.Once
	c    *localcluster.Cluster
	err  error
}

const testDriver = "hostpath.csi.lifeboat.io"

func csiConfig(t *testing.T) *rest.Config {
	t.Helper()
	csiCluster.once.Do(func() {
		c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
		if err != nil {
			csiCluster.err = err
			return
		}
		csiCluster.c = c
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
		if err != nil {
			csiCluster.err = fmt.Errorf("finding the snapshot CRDs: %w", err)
			return
		}
		_, csiCluster.err = envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(strings.TrimSpace(string(out)), "config", "crd")}, ErrorIfPathMissing: true})
	})
	if csiCluster.err != nil {
		t.Fatal(csiCluster.err)
	}
	return csiCluster.c.Config
}

func stopCSICluster() {
	if csiCluster.c != nil {
		_ = csiCluster.c.Stop()
	}
}

// fakeSnapshotController plays the snapshot controller and the driver's
// snapshotter (the local API server runs neither): every VolumeSnapshot
// of its namespace gets a bound content with a handle, then both are made
// ready. Contents carry a finalizer of the test's, so a content the backup
// deleted stays readable (with its deletion timestamp and policy).
type fakeSnapshotController struct {
	c  crclient.Client
	ns string
	// never: claims whose snapshot is never cut; the VolumeSnapshot gets
	// the error message instead.
	never map[string]string
	log   *eventLog
	done  chan struct{}
}

const holdFinalizer = "test.lifeboat.io/hold"

func startFakeSnapshotController(t *testing.T, c crclient.Client, ns string, never map[string]string, log *eventLog) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeSnapshotController{c: c, ns: ns, never: never, log: log, done: make(chan struct{})}
	go f.run(ctx)
	t.Cleanup(func() {
		cancel()
		<-f.done
		list := &snapshotv1.VolumeSnapshotContentList{}
		if err := c.List(context.Background(), list); err == nil {
			for i := range list.Items {
				vsc := &list.Items[i]
				if vsc.Spec.VolumeSnapshotRef.Namespace == ns {
					_ = c.Patch(context.Background(), vsc, crclient.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
					_ = c.Delete(context.Background(), vsc)
				}
			}
		}
	})
}

func (f *fakeSnapshotController) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		list := &snapshotv1.VolumeSnapshotList{}
		if err := f.c.List(ctx, list, crclient.InNamespace(f.ns)); err == nil {
			for i := range list.Items {
				f.reconcile(ctx, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (f *fakeSnapshotController) reconcile(ctx context.Context, vs *snapshotv1.VolumeSnapshot) {
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil || vs.DeletionTimestamp != nil {
		return
	}
	claim := *vs.Spec.Source.PersistentVolumeClaimName
	if msg, ok := f.never[claim]; ok {
		if vs.Status == nil {
			vs.Status = &snapshotv1.VolumeSnapshotStatus{Error: &snapshotv1.VolumeSnapshotError{Message: &msg}}
			_ = f.c.Status().Update(ctx, vs)
		}
		return
	}
	handle := "snap-" + claim
	volume := "vol-" + claim
	vsc := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-" + string(vs.UID), Finalizers: []string{holdFinalizer}},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef:       corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1", Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID},
			DeletionPolicy:          snapshotv1.VolumeSnapshotContentDelete,
			Driver:                  testDriver,
			VolumeSnapshotClassName: vs.Spec.VolumeSnapshotClassName,
			Source:                  snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &volume},
		},
	}
	if err := f.c.Create(ctx, vsc); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	if f.log != nil {
		f.log.add("cut " + claim)
	}
	ready := true
	size := int64(1 << 30)
	now := metav1.Now()
	created := now.UnixNano()
	vsc.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, RestoreSize: &size, CreationTime: &created}
	if err := f.c.Status().Update(ctx, vsc); err != nil {
		return
	}
	name := vsc.Name
	vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &name, ReadyToUse: &ready, CreationTime: &now,
		RestoreSize: resource.NewQuantity(size, resource.BinarySI)}
	_ = f.c.Status().Update(ctx, vs)
}

// csiFixture is a namespace on the CSI API server with a StorageClass of
// the test driver and a VolumeSnapshotClass labelled for it.
func csiFixture(t *testing.T) (*fixture, kubernetes.Interface, string) {
	t.Helper()
	rc := csiConfig(t)
	f := newFixtureOn(t, rc, 0)
	cs := kubernetes.NewForConfigOrDie(rc)
	ctx := context.Background()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.ns}, Provisioner: testDriver}
	if err := f.engine.Client.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	// A class of another driver, and one of this driver without the
	// label: Velero picks the labelled one.
	for _, cls := range []*snapshotv1.VolumeSnapshotClass{
		{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-a-other", Labels: map[string]string{csisnapshot.ClassSelectorLabel: "true"}},
			Driver: "other.csi.example.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete},
		{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-b-unlabelled"}, Driver: testDriver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete},
		{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-c-velero", Labels: map[string]string{csisnapshot.ClassSelectorLabel: "true"}}, Driver: testDriver,
			DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete},
	} {
		if err := f.engine.Client.Create(ctx, cls); err != nil {
			t.Fatal(err)
		}
	}
	return f, cs, f.ns
}

func csiVolume(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	createVolume(t, cs, ns, name, ns, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: "vol-" + name}})
}

func backupErrors(t *testing.T, f *fixture, name string) string {
	t.Helper()
	var res results.Results
	if err := f.store.GetGzipJSON(context.Background(), f.store.BackupKey(name, storage.BackupResultsFile(name)), &res); err != nil {
		t.Fatal(err)
	}
	return strings.Join(res.Errors.Namespaces[f.ns], "\n")
}

// TestCSISnapshotBackup: each claim of a CSI volume gets a VolumeSnapshot
// of the class Velero picks; the backup stores the ready VolumeSnapshot
// (with Velero's annotations), its content and the class, the claim names
// its snapshot, the volume information says which snapshot each volume
// got, and the objects are gone from the cluster with the content
// retained, so the storage snapshot belongs to the backup alone.
func TestCSISnapshotBackup(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	c := f.engine.Client
	for _, claim := range []string{"data", "logs"} {
		csiVolume(t, cs, ns, claim)
	}
	startFakeSnapshotController(t, c, ns, nil, nil)
	b := f.backup("csi")
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.CSIVolumeSnapshotsAttempted != 2 || out.CSIVolumeSnapshotsCompleted != 2 {
		t.Fatalf("outcome %+v; errors: %s", out, backupErrors(t, f, b.Name))
	}
	items := readItems(t, f, b.Name)
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("volume infos %+v", infos)
	}
	for _, claim := range []string{"data", "logs"} {
		pvc := items["resources/persistentvolumeclaims/namespaces/"+ns+"/"+claim+".json"]
		if pvc == nil {
			t.Fatalf("claim %s not stored", claim)
		}
		vsName := pvc.GetAnnotations()[csisnapshot.VolumeSnapshotNameLabel]
		if !strings.HasPrefix(vsName, "velero-"+claim+"-") || pvc.GetLabels()[csisnapshot.VolumeSnapshotNameLabel] != vsName ||
			pvc.GetLabels()[v1.BackupNameLabel] != b.Name || pvc.GetAnnotations()[csisnapshot.MustIncludeAdditionalItems] != "true" {
			t.Fatalf("stored claim %s metadata: labels %v annotations %v", claim, pvc.GetLabels(), pvc.GetAnnotations())
		}
		vs := items["resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/"+ns+"/"+vsName+".json"]
		if vs == nil {
			t.Fatalf("VolumeSnapshot %s not stored; items: %v", vsName, keysOf(items))
		}
		stored := &snapshotv1.VolumeSnapshot{}
		toTyped(t, vs.Object, stored)
		wantAnn := map[string]string{
			csisnapshot.HandleAnnotation: "snap-" + claim, csisnapshot.DriverAnnotation: testDriver,
			csisnapshot.ContentDeletionPolicyAnnot: "Delete", csisnapshot.RestoreSizeAnnotation: "1Gi",
		}
		for k, v := range wantAnn {
			if stored.Annotations[k] != v {
				t.Errorf("stored VolumeSnapshot annotation %s = %q, want %q", k, stored.Annotations[k], v)
			}
		}
		if stored.Status == nil || stored.Status.ReadyToUse == nil || !*stored.Status.ReadyToUse || stored.Status.BoundVolumeSnapshotContentName == nil {
			t.Fatalf("stored VolumeSnapshot status %+v, want ready and bound", stored.Status)
		}
		if *stored.Spec.VolumeSnapshotClassName != ns+"-c-velero" || stored.Labels[v1.BackupNameLabel] != b.Name || stored.Labels["storage-class"] != ns {
			t.Errorf("stored VolumeSnapshot class %s labels %v", *stored.Spec.VolumeSnapshotClassName, stored.Labels)
		}
		vscName := *stored.Status.BoundVolumeSnapshotContentName
		vscItem := items["resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/"+vscName+".json"]
		if vscItem == nil || vscItem.GetLabels()[v1.BackupNameLabel] != b.Name {
			t.Fatalf("VolumeSnapshotContent %s stored: %v", vscName, vscItem)
		}
		// In the cluster: the snapshot is gone, the content was set to
		// Retain before it was deleted (held here by the test's finalizer).
		if err := c.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: vsName}, &snapshotv1.VolumeSnapshot{}); !apierrors.IsNotFound(err) {
			t.Errorf("VolumeSnapshot %s still in the cluster: %v", vsName, err)
		}
		live := &snapshotv1.VolumeSnapshotContent{}
		if err := c.Get(ctx, crclient.ObjectKey{Name: vscName}, live); err != nil {
			t.Fatal(err)
		}
		if live.DeletionTimestamp == nil || live.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentRetain {
			t.Errorf("content in the cluster: deleted %v, policy %s; want deleted with policy Retain", live.DeletionTimestamp, live.Spec.DeletionPolicy)
		}
		var info *volumefiles.BackupVolumeInfo
		for i := range infos {
			if infos[i].PVCName == claim {
				info = &infos[i]
			}
		}
		if info == nil || info.BackupMethod != volumefiles.CSISnapshot || info.Result != volumefiles.ResultSucceeded || !info.PreserveLocalSnapshot ||
			info.CSISnapshotInfo == nil || info.CSISnapshotInfo.SnapshotHandle != "snap-"+claim || info.CSISnapshotInfo.VSCName != vscName ||
			info.CSISnapshotInfo.Driver != testDriver || info.CSISnapshotInfo.Size != 1<<30 || info.CSISnapshotInfo.VolumeSnapshot != ns+"/"+vsName {
			t.Errorf("volume info of %s: %+v (csi %+v)", claim, info, info.CSISnapshotInfo)
		}
	}
	if items["resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/"+ns+"-c-velero.json"] == nil {
		t.Errorf("the VolumeSnapshotClass is not stored; items: %v", keysOf(items))
	}
	var classes []snapshotv1.VolumeSnapshotClass
	if err := f.store.GetGzipJSON(ctx, f.store.BackupKey(b.Name, storage.CSIVolumeSnapshotClassesFile(b.Name)), &classes); err != nil ||
		len(classes) != 1 || classes[0].Name != ns+"-c-velero" || classes[0].Driver != testDriver {
		t.Errorf("%s: %+v, %v", storage.CSIVolumeSnapshotClassesFile(b.Name), classes, err)
	}
	// Stored once each: the snapshots listed with the namespace are this
	// backup's own and are not stored a second time as listed.
	n := 0
	for k := range items {
		if strings.HasPrefix(k, "resources/volumesnapshots.snapshot.storage.k8s.io/") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d VolumeSnapshot items, want 2", n)
	}
}

// TestCSISnapshotFailures: a class that cannot be chosen and a snapshot
// that is never cut each fail the backup partially, with an error naming
// the claim and the fix; the snapshot that timed out is deleted.
func TestCSISnapshotFailures(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	c := f.engine.Client
	csiVolume(t, cs, ns, "slow")
	// orphan's storage class names a driver with no VolumeSnapshotClass.
	orphanClass := ns + "-orphan"
	if err := c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: orphanClass}, Provisioner: "orphan.csi.example.io"}); err != nil {
		t.Fatal(err)
	}
	createVolume(t, cs, ns, "orphan", orphanClass, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "orphan.csi.example.io", VolumeHandle: "vol-orphan"}})
	startFakeSnapshotController(t, c, ns, map[string]string{"slow": "the disk is on fire"}, nil)
	b := f.backup("csi-fail")
	yes := true
	b.Spec.SnapshotVolumes = &yes
	b.Spec.CSISnapshotTimeout = metav1.Duration{Duration: time.Second}
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhasePartiallyFailed {
		t.Fatalf("outcome %+v, want PartiallyFailed", out)
	}
	errs := backupErrors(t, f, b.Name)
	for _, want := range []string{
		"PersistentVolumeClaim " + ns + "/orphan: CSI snapshot not taken: no VolumeSnapshotClass for driver orphan.csi.example.io: label the class to use velero.io/csi-volumesnapshot-class=true",
		"PersistentVolumeClaim " + ns + "/slow: CSI snapshot failed: VolumeSnapshot " + ns + "/velero-slow-",
		"within spec.csiSnapshotTimeout (1s); last error: the disk is on fire",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
	list := &snapshotv1.VolumeSnapshotList{}
	if err := c.List(ctx, list, crclient.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("VolumeSnapshots left in the cluster: %d", len(list.Items))
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Result != volumefiles.ResultFailed {
			t.Errorf("volume info of %s: result %q, want failed", in.PVCName, in.Result)
		}
	}
}

// TestCSISnapshotWithinHookedPodGroup: the claim a hooked pod mounts is
// stored right after the pod, its snapshot cut before the pod's post
// hook, not at the end of the backup.
func TestCSISnapshotWithinHookedPodGroup(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	csiVolume(t, cs, ns, "data")
	hooked := map[string]string{"pre.hook.backup.velero.io/command": `["freeze"]`, "post.hook.backup.velero.io/command": `["thaw"]`}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: hooked},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	f.engine.Hooks = log
	f.engine.Plugins = fakePlugins{v1: map[string]api.BackupItemAction{"example.io/record": recordClaims{log: log}}}
	startFakeSnapshotController(t, f.engine.Client, ns, nil, log)
	b := f.backup("csi-hooks")
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.CSIVolumeSnapshotsCompleted != 1 {
		t.Fatalf("outcome %+v; errors %s", out, backupErrors(t, f, b.Name))
	}
	want := []string{"hook db: freeze", "store pod db", "store persistentvolumeclaim data", "cut data", "hook db: thaw"}
	if !reflect.DeepEqual(log.events, want) {
		t.Errorf("order of events:\n got %q\nwant %q", log.events, want)
	}
}

// recordClaims records the pods and claims it sees.
type recordClaims struct{ log *eventLog }

func (recordClaims) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"pods", "persistentvolumeclaims"}}, nil
}

func (a recordClaims) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	a.log.add("store " + strings.ToLower(u.GetKind()) + " " + u.GetName())
	return u, nil, nil
}

func toTyped(t *testing.T, obj map[string]any, into any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// TestCSISnapshotsOfAFailedBackupAreDeleted: a backup that fails after its
// snapshots were taken (its metadata cannot be written) deletes them with
// their storage snapshots (contents set to Delete), rather than keeping
// snapshots no backup names.
func TestCSISnapshotsOfAFailedBackupAreDeleted(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	c := f.engine.Client
	csiVolume(t, cs, ns, "data")
	startFakeSnapshotController(t, c, ns, nil, nil)
	b := f.backup("csi-broken")
	f.faulty.failKey, f.faulty.failAfter = "velero-backup.json", 0
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseFailed {
		t.Fatalf("outcome %+v, want Failed", out)
	}
	vss := &snapshotv1.VolumeSnapshotList{}
	if err := c.List(ctx, vss, crclient.InNamespace(ns)); err != nil || len(vss.Items) != 0 {
		t.Fatalf("VolumeSnapshots left: %d (%v)", len(vss.Items), err)
	}
	vscs := &snapshotv1.VolumeSnapshotContentList{}
	if err := c.List(ctx, vscs); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, vsc := range vscs.Items {
		if vsc.Spec.VolumeSnapshotRef.Namespace != ns {
			continue
		}
		n++
		// No snapshot controller runs here to delete it after its
		// snapshot; what matters is that it would take the storage
		// snapshot with it.
		if vsc.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete || vsc.DeletionTimestamp != nil {
			t.Errorf("content %s: policy %s, deleted %v; want Delete, left to the snapshot controller", vsc.Name, vsc.Spec.DeletionPolicy, vsc.DeletionTimestamp)
		}
	}
	if n != 1 {
		t.Errorf("%d contents of the namespace, want 1", n)
	}
}

// TestCSISnapshotWithoutClusterResources: with cluster-scoped resources
// left out, the claim still gets its snapshot, and the content and class
// are stored anyway (Velero's must-include rule), so it can be restored.
func TestCSISnapshotWithoutClusterResources(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	csiVolume(t, cs, ns, "data")
	startFakeSnapshotController(t, f.engine.Client, ns, nil, nil)
	b := f.backup("csi-namespaced")
	no := false
	b.Spec.IncludeClusterResources = &no
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.CSIVolumeSnapshotsCompleted != 1 {
		t.Fatalf("outcome %+v; errors %s", out, backupErrors(t, f, b.Name))
	}
	items := readItems(t, f, b.Name)
	var vs, vsc, class, pv int
	for k := range items {
		switch {
		case strings.HasPrefix(k, "resources/volumesnapshots.snapshot.storage.k8s.io/"):
			vs++
		case strings.HasPrefix(k, "resources/volumesnapshotcontents.snapshot.storage.k8s.io/"):
			vsc++
		case strings.HasPrefix(k, "resources/volumesnapshotclasses.snapshot.storage.k8s.io/"):
			class++
		case strings.HasPrefix(k, "resources/persistentvolumes/"):
			pv++
		}
	}
	if vs != 1 || vsc != 1 || class != 1 || pv != 0 {
		t.Errorf("stored: %d snapshots, %d contents, %d classes, %d volumes; want 1, 1, 1, 0", vs, vsc, class, pv)
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].BackupMethod != volumefiles.CSISnapshot || infos[0].PVName != ns+"-data" || infos[0].Result != volumefiles.ResultSucceeded {
		t.Errorf("volume info %+v", infos)
	}
}

// pickySnapshotter knows only the CSI volumes whose handle has its prefix.
type pickySnapshotter struct {
	*recordingSnapshotter
	prefix string
}

func (s pickySnapshotter) GetVolumeID(pv runtime.Unstructured) (string, error) {
	id, err := s.recordingSnapshotter.GetVolumeID(pv)
	if err != nil || !strings.HasPrefix(id, s.prefix) {
		return "", err
	}
	return id, nil
}

// TestCSIVolumeTakenByALocationIsSnapshottedNatively: where a
// VolumeSnapshotLocation's VolumeSnapshotter knows a CSI volume, it takes
// the snapshot (natively, after the archive) and no VolumeSnapshot is
// made; the volume it does not know gets a CSI snapshot.
func TestCSIVolumeTakenByALocationIsSnapshottedNatively(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	csiVolume(t, cs, ns, "native")
	csiVolume(t, cs, ns, "data")
	loc := ns + "-snaps"
	vsl := &v1.VolumeSnapshotLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: loc},
		Spec: v1.VolumeSnapshotLocationSpec{Provider: "fake.io/snapshots"}}
	if err := c.Create(ctx, vsl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vsl) })
	creds, err := credentials.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Close()
	f.engine.SnapshotLocations = &locations.Resolver{Client: c, SecretReader: c, Namespace: "velero", Credentials: creds}
	rec := &recordingSnapshotter{}
	f.engine.Plugins = fakePlugins{snapshotters: map[string]api.VolumeSnapshotter{"fake.io/snapshots": pickySnapshotter{rec, "vol-native"}}}
	startFakeSnapshotController(t, c, ns, nil, nil)
	b := f.backup("csi-or-native")
	b.Spec.VolumeSnapshotLocations = []string{loc}
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.VolumeSnapshotsCompleted != 1 || out.CSIVolumeSnapshotsCompleted != 1 || out.CSIVolumeSnapshotsAttempted != 1 {
		t.Fatalf("outcome %+v; errors %s", out, backupErrors(t, f, b.Name))
	}
	if want := []string{"vol-native@" + ns + "-native"}; !reflect.DeepEqual(rec.volumes, want) {
		t.Errorf("native snapshots %v, want %v", rec.volumes, want)
	}
	items := readItems(t, f, b.Name)
	native := items["resources/persistentvolumeclaims/namespaces/"+ns+"/native.json"]
	if _, ok := native.GetAnnotations()[csisnapshot.VolumeSnapshotNameLabel]; ok {
		t.Errorf("the natively snapshotted claim names a VolumeSnapshot: %v", native.GetAnnotations())
	}
	data := items["resources/persistentvolumeclaims/namespaces/"+ns+"/data.json"]
	if !strings.HasPrefix(data.GetAnnotations()[csisnapshot.VolumeSnapshotNameLabel], "velero-data-") {
		t.Errorf("the CSI claim's annotations %v", data.GetAnnotations())
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]volumefiles.Method{}
	for _, in := range infos {
		methods[in.PVCName] = in.BackupMethod
	}
	if methods["native"] != volumefiles.NativeSnapshot || methods["data"] != volumefiles.CSISnapshot {
		t.Errorf("backup methods %v", methods)
	}
}

// TestCSINoClassWhenOnlyTheDefaultChose: with snapshotVolumes unset and no
// policy, a CSI volume whose driver has no class is a warning, not a
// failure, and counts as no attempt; the volume information says why.
func TestCSINoClassWhenOnlyTheDefaultChose(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	c := f.engine.Client
	orphanClass := ns + "-orphan"
	if err := c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: orphanClass}, Provisioner: "orphan.csi.example.io"}); err != nil {
		t.Fatal(err)
	}
	createVolume(t, cs, ns, "orphan", orphanClass, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "orphan.csi.example.io", VolumeHandle: "vol-orphan"}})
	b := f.backup("csi-default")
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.Warnings == 0 || out.CSIVolumeSnapshotsAttempted != 0 {
		t.Fatalf("outcome %+v, want Completed with a warning and no attempt", out)
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].Skipped || infos[0].Result == volumefiles.ResultFailed ||
		!strings.Contains(infos[0].SkippedReason, "no VolumeSnapshotClass for driver orphan.csi.example.io") {
		t.Errorf("volume info %+v", infos)
	}
}

// loggingSnapshotter records its snapshots in the order test's log.
type loggingSnapshotter struct {
	*recordingSnapshotter
	log *eventLog
}

func (s loggingSnapshotter) CreateSnapshot(volumeID, az string, tags map[string]string) (string, error) {
	s.log.add("native snapshot " + volumeID)
	return s.recordingSnapshotter.CreateSnapshot(volumeID, az, tags)
}

// TestNativeSnapshotHoldsTheHookedPodsPostHook: a hooked pod's claim
// snapshotted by a VolumeSnapshotter is stored with the pod, but its post
// hook waits for the native snapshot, taken after the archive.
func TestNativeSnapshotHoldsTheHookedPodsPostHook(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createVolume(t, cs, f.ns, "data", "gold", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + f.ns}})
	hooked := map[string]string{"pre.hook.backup.velero.io/command": `["freeze"]`, "post.hook.backup.velero.io/command": `["thaw"]`}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db", Annotations: hooked},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	created, err := cs.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	if _, err := cs.CoreV1().Pods(f.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A provider of its own, and the location removed after: other tests
	// of the package let the only location of fake.io/snapshots be chosen.
	loc := f.ns + "-snaps"
	vsl := &v1.VolumeSnapshotLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: loc},
		Spec: v1.VolumeSnapshotLocationSpec{Provider: "fake.io/logged-snapshots"}}
	if err := c.Create(ctx, vsl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vsl) })
	creds, err := credentials.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Close()
	f.engine.SnapshotLocations = &locations.Resolver{Client: c, SecretReader: c, Namespace: "velero", Credentials: creds}
	log := &eventLog{}
	f.engine.Hooks = log
	f.engine.Plugins = fakePlugins{
		v1:           map[string]api.BackupItemAction{"example.io/record": recordClaims{log: log}},
		snapshotters: map[string]api.VolumeSnapshotter{"fake.io/logged-snapshots": loggingSnapshotter{&recordingSnapshotter{}, log}},
	}
	b := f.backup("native-hooks")
	b.Spec.VolumeSnapshotLocations = []string{loc}
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.VolumeSnapshotsCompleted != 1 {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"hook db: freeze", "store pod db", "store persistentvolumeclaim data", "native snapshot /data/" + f.ns, "hook db: thaw"}
	if !reflect.DeepEqual(log.events, want) {
		t.Errorf("order of events:\n got %q\nwant %q", log.events, want)
	}
}

// TestCSISnapshotsOfAPageAreCreatedTogether: the claims of a page get
// their VolumeSnapshots several at a time, not one after another (made
// one by one, a backup of a hundred claims waited seconds on the API
// server), each claim exactly one, and the archive holds them in claim
// order whichever create returned first.
func TestCSISnapshotsOfAPageAreCreatedTogether(t *testing.T) {
	f, cs, ns := csiFixture(t)
	ctx := context.Background()
	var claims []string
	for i := range 12 {
		claims = append(claims, fmt.Sprintf("data-%02d", i))
		csiVolume(t, cs, ns, claims[i])
	}
	var mu sync.Mutex
	inFlight, peak := 0, 0
	created := map[string]int{}
	// Each create takes a while, as on a busy API server.
	base, err := crclient.NewWithWatch(csiConfig(t), crclient.Options{Scheme: f.engine.Client.Scheme(), Mapper: f.engine.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	f.engine.Client = interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c crclient.WithWatch, obj crclient.Object, opts ...crclient.CreateOption) error {
			vs, ok := obj.(*snapshotv1.VolumeSnapshot)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			created[*vs.Spec.Source.PersistentVolumeClaimName]++
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
			return c.Create(ctx, obj, opts...)
		},
	})
	startFakeSnapshotController(t, f.engine.Client, ns, nil, nil)
	b := f.backup("csi-page")
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.CSIVolumeSnapshotsCompleted != len(claims) {
		t.Fatalf("outcome %+v; errors: %s", out, backupErrors(t, f, b.Name))
	}
	if peak < 2 {
		t.Errorf("at most %d VolumeSnapshot create in flight, want several", peak)
	}
	for _, claim := range claims {
		if created[claim] != 1 {
			t.Errorf("claim %s: %d VolumeSnapshots created, want 1", claim, created[claim])
		}
	}
	// The archive's VolumeSnapshots, in the order written: by claim.
	items := readItems(t, f, b.Name)
	var order []string
	for _, claim := range claims {
		pvc := items["resources/persistentvolumeclaims/namespaces/"+ns+"/"+claim+".json"]
		vsName := pvc.GetAnnotations()[csisnapshot.VolumeSnapshotNameLabel]
		if items["resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/"+ns+"/"+vsName+".json"] == nil {
			t.Fatalf("claim %s names VolumeSnapshot %q, which is not stored", claim, vsName)
		}
		order = append(order, vsName)
	}
	written := archiveOrder(t, f, b.Name, "resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/"+ns+"/")
	if !reflect.DeepEqual(written, order) {
		t.Errorf("VolumeSnapshots written in the order %v, want the claims' %v", written, order)
	}
}

// archiveOrder returns the paths under prefix in the backup's tarball, in
// the order written, as names without the .json.
func archiveOrder(t *testing.T, f *fixture, name, prefix string) []string {
	t.Helper()
	rc, err := f.store.GetBackupContents(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Item != nil && !e.PreferredVersionCopy && strings.HasPrefix(e.Path, prefix) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(e.Path, prefix), ".json"))
		}
	}
}
