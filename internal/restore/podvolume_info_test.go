package restore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// The restore's volume information lists the volumes PodVolumeRestores
// wrote, as Velero's does: a claim's volume with restoreMethod
// PodVolumeRestore and pvrInfo (snapshot, size, uploader, pod and
// volume), the bound PersistentVolume of a claim the restore created, a
// failed one too; a volume that is not a claim (emptyDir) is left out.
func TestPodVolumeRestoresInTheVolumeInformation(t *testing.T) {
	w := newWorld(t)
	from := uniq("pvinfo")
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pvc := item(t, "v1", "PersistentVolumeClaim", from, "data-claim", map[string]any{"spec": map[string]any{
		"accessModes": []any{"ReadWriteOnce"},
		"resources":   map[string]any{"requests": map[string]any{"storage": "1Gi"}},
	}})
	pod := item(t, "v1", "Pod", from, "web", map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "app", "image": "busybox"}},
		"volumes": []any{
			map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "data-claim"}},
			map[string]any{"name": "logs", "persistentVolumeClaim": map[string]any{"claimName": "logs-claim"}},
			map[string]any{"name": "cache", "emptyDir": map[string]any{}},
		},
	}})
	b := w.tarball(
		archivetest.Entry{Name: "resources/persistentvolumeclaims/namespaces/" + from + "/data-claim.json", Data: pvc},
		archivetest.Entry{Name: "resources/pods/namespaces/" + from + "/web.json", Data: pod},
	)
	b.Spec.StorageLocation = "default"
	var pvbs []v1.PodVolumeBackup
	for _, vol := range []string{"data", "logs", "cache"} {
		p := v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: b.Name + "-" + vol}}
		p.Spec.Pod = corev1.ObjectReference{Kind: "Pod", Namespace: from, Name: "web"}
		p.Spec.Volume, p.Spec.BackupStorageLocation, p.Spec.UploaderType = vol, "default", "kopia"
		p.Status.Phase, p.Status.SnapshotID = v1.PodVolumePhaseCompleted, "snap-"+vol
		pvbs = append(pvbs, p)
	}
	if err := w.store.PutPodVolumeBackups(ctx(t), b.Name, pvbs); err != nil {
		t.Fatal(err)
	}
	// logs-claim exists already (not created by the restore).
	to := uniq("pvinfoto")
	w.namespace(to)
	acc := newAccess(t)
	if err := acc.Client.Create(ctx(t), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: to, Name: "logs-claim"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}); err != nil {
		t.Fatal(err)
	}

	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs"), UID: types.UID(uniq("uid"))},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{from: to}}}
	e := NewEngine(acc, nil)
	e.PodVolumes = &PodVolumeOptions{Repositories: &fakeEnsurer{}, Image: "registry.example/lifeboat:test", Timeout: time.Minute, Poll: 50 * time.Millisecond}
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	go func() {
		for c.Err() == nil {
			var list v1.PodVolumeRestoreList
			_ = acc.Client.List(c, &list, client.InNamespace("velero"), client.MatchingLabels{RestoreUIDLabel: string(rs.UID)})
			for _, p := range list.Items {
				if p.Status.Phase != "" {
					continue
				}
				if p.Spec.Volume == "data" {
					// What the cluster's binder does once the pod runs.
					var claim corev1.PersistentVolumeClaim
					if err := acc.Client.Get(c, client.ObjectKey{Namespace: to, Name: "data-claim"}, &claim); err != nil {
						continue
					}
					claim.Spec.VolumeName = "pv-restored"
					if err := acc.Client.Update(c, &claim); err != nil {
						t.Logf("binding the claim: %v", err)
						continue
					}
					claim.Status.Phase = corev1.ClaimBound
					if err := acc.Client.Status().Update(c, &claim); err != nil {
						t.Logf("binding the claim: %v", err)
						continue
					}
				}
				p.Status.Phase = v1.PodVolumePhaseCompleted
				if p.Spec.Volume == "logs" {
					p.Status.Phase, p.Status.Message = v1.PodVolumePhaseFailed, "disk full"
				}
				p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: 4096, BytesDone: 4096}
				_ = acc.Client.Update(c, &p)
			}
			select {
			case <-c.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	out := e.Run(ctx(t), rs, b, w.store, nil)
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 1 {
		t.Fatalf("restore: %+v, want PartiallyFailed with the logs volume's error\n%s", out, allErrors(w.results(rs)))
	}
	var infos []volumefiles.RestoreVolumeInfo
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, rs.Name+"-volumeinfo.json.gz"), &infos); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(infos)
	want := `[` +
		`{"pvcName":"logs-claim","pvcNamespace":"` + to + `","restoreMethod":"PodVolumeRestore","snapshotDataMoved":false,` +
		`"pvrInfo":{"snapshotHandle":"snap-logs","size":4096,"uploaderType":"kopia","volumeName":"logs","podName":"web","podNamespace":"` + to + `","Phase":""}},` +
		`{"pvcName":"data-claim","pvcNamespace":"` + to + `","pvName":"pv-restored","restoreMethod":"PodVolumeRestore","snapshotDataMoved":false,` +
		`"pvrInfo":{"snapshotHandle":"snap-data","size":4096,"uploaderType":"kopia","volumeName":"data","podName":"web","podNamespace":"` + to + `","Phase":""}}` +
		`]`
	if string(got) != want {
		t.Errorf("restore volume information:\n got %s\nwant %s", got, want)
	}
}
