package restore

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the code does now")

func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if string(want) != string(got) {
		t.Errorf("differs from %s (go test -update rewrites it after a deliberate change):\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestWaitContainerShape(t *testing.T) {
	restricted := waitContainer("registry.example/lifeboat:v1", DefaultRestoreHelperCommand, "rs-uid", []string{"cache", "data"}, nil)
	checkGolden(t, "restore-wait.golden.yaml", restricted)

	// The first container's security context is copied, as in Velero.
	uid := int64(42)
	sc := &corev1.SecurityContext{RunAsUser: &uid}
	got := waitContainer("img", []string{"/x"}, "u", []string{"v"}, sc)
	if got.SecurityContext == sc || got.SecurityContext.RunAsUser == nil || *got.SecurityContext.RunAsUser != 42 || got.SecurityContext.RunAsNonRoot != nil {
		t.Errorf("security context: got %+v, want a copy of %+v", got.SecurityContext, sc)
	}
}

func TestPodVolumeRestoreShape(t *testing.T) {
	yes := true
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "rs1", UID: "rs-uid"},
		Spec:       v1.RestoreSpec{UploaderConfig: &v1.UploaderConfigForRestore{WriteSparseFiles: &yes, ParallelFilesDownload: 3}},
	}
	pvr := newPodVolumeRestore(rs, "shop-copy", "web", "pod-uid", "shop",
		podVolumeSource{volume: "data", snapshotID: "k123", uploaderType: "kopia", location: "default", size: 4096}, "pvc-uid")
	checkGolden(t, "podvolumerestore.golden.yaml", pvr)
}

// fakeEnsurer records the repositories asked for.
type fakeEnsurer struct {
	mu    sync.Mutex
	asked []string
	err   error
}

func (f *fakeEnsurer) Ensure(_ context.Context, ns, location string) (*v1.BackupRepository, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ns+"/"+location)
	return &v1.BackupRepository{}, f.err
}

// fakeNodeAgent ends every PodVolumeRestore of the restore as end says,
// checking first that its pod exists with the wait container first.
func fakeNodeAgent(t *testing.T, c context.Context, cl client.Client, restoreUID types.UID, end func(v1.PodVolumeRestore) (v1.PodVolumePhase, string)) {
	go func() {
		for c.Err() == nil {
			var list v1.PodVolumeRestoreList
			if err := cl.List(c, &list, client.InNamespace("velero"), client.MatchingLabels{RestoreUIDLabel: string(restoreUID)}); err == nil {
				for _, p := range list.Items {
					if p.Status.Phase != "" {
						continue
					}
					var pod corev1.Pod
					if err := cl.Get(c, client.ObjectKey{Namespace: p.Spec.Pod.Namespace, Name: p.Spec.Pod.Name}, &pod); err != nil {
						t.Logf("fake node agent: %v", err)
						continue
					}
					if pod.UID != p.Spec.Pod.UID || len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Name != RestoreWaitContainer {
						t.Errorf("PodVolumeRestore %s: pod %s/%s (uid %s, init containers %v) is not the restored pod with restore-wait first", p.Name, pod.Namespace, pod.Name, pod.UID, pod.Spec.InitContainers)
					}
					phase, msg := end(p)
					if phase == "" {
						continue
					}
					p.Status.Phase, p.Status.Message = phase, msg
					if err := cl.Update(c, &p); err != nil && c.Err() == nil {
						t.Logf("fake node agent: %v", err)
					}
				}
			}
			select {
			case <-c.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

type pvFixture struct {
	b       *v1.Backup
	from    string
	ensurer *fakeEnsurer
}

// podVolumeBackup stores a backup of pod "web" in from (volumes data,
// cache, an empty one and a projected one) and its PodVolumeBackups file.
func podVolumeBackup(t *testing.T, w *world, pvbs any) *pvFixture {
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	from := uniq("pvfrom")
	pod := item(t, "v1", "Pod", from, "web", map[string]any{"spec": map[string]any{
		"initContainers": []any{
			map[string]any{"name": "restore-wait", "image": "old/velero:v1"},
			map[string]any{"name": "setup", "image": "busybox"},
		},
		"containers": []any{map[string]any{"name": "app", "image": "busybox"}},
		"volumes": []any{
			map[string]any{"name": "data", "emptyDir": map[string]any{}},
			map[string]any{"name": "cache", "emptyDir": map[string]any{}},
			map[string]any{"name": "empty", "emptyDir": map[string]any{}},
			map[string]any{"name": "token", "projected": map[string]any{"sources": []any{}}},
		},
	}})
	b := w.tarball(archivetest.Entry{Name: "resources/pods/namespaces/" + from + "/web.json", Data: pod})
	b.Spec.StorageLocation = "default"
	if pvbs == nil {
		mk := func(vol, snap string, phase v1.PodVolumePhase) v1.PodVolumeBackup {
			p := v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: b.Name + "-" + vol}}
			p.Spec.Pod = corev1.ObjectReference{Kind: "Pod", Namespace: from, Name: "web"}
			p.Spec.Volume, p.Spec.BackupStorageLocation, p.Spec.UploaderType = vol, "elsewhere", "kopia"
			p.Status.Phase, p.Status.SnapshotID = phase, snap
			p.Status.Progress.TotalBytes = 10
			return p
		}
		other := mk("data", "not-ours", v1.PodVolumePhaseCompleted)
		other.Spec.Pod.Name = "other"
		pvbs = []v1.PodVolumeBackup{
			mk("data", "snap-data", v1.PodVolumePhaseCompleted),
			mk("cache", "snap-cache", v1.PodVolumePhaseCompleted),
			mk("empty", "", v1.PodVolumePhaseCompleted),
			mk("token", "snap-token", v1.PodVolumePhaseCompleted),
			other,
		}
	}
	if err := w.store.PutPodVolumeBackups(ctx(t), b.Name, pvbs); err != nil {
		t.Fatal(err)
	}
	return &pvFixture{b: b, from: from, ensurer: &fakeEnsurer{}}
}

func (f *pvFixture) restore(t *testing.T, w *world, timeout time.Duration, end func(v1.PodVolumeRestore) (v1.PodVolumePhase, string)) (*v1.Restore, Outcome, string) {
	t.Helper()
	return f.restoreWith(t, w, &PodVolumeOptions{Timeout: timeout}, end, "")
}

// restoreWith restores with the given options (repositories, image and poll
// filled in); a non-empty node is where a fake scheduler binds the
// restored pods.
func (f *pvFixture) restoreWith(t *testing.T, w *world, o *PodVolumeOptions, end func(v1.PodVolumeRestore) (v1.PodVolumePhase, string), node string) (*v1.Restore, Outcome, string) {
	t.Helper()
	to := uniq("pvto")
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs"), UID: types.UID(uniq("uid"))},
		Spec: v1.RestoreSpec{BackupName: f.b.Name, NamespaceMapping: map[string]string{f.from: to}}}
	acc := newAccess(t)
	e := NewEngine(acc, nil)
	o.Repositories, o.Image, o.Poll = f.ensurer, "registry.example/lifeboat:test", 50*time.Millisecond
	e.PodVolumes = o
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	if end != nil {
		fakeNodeAgent(t, c, acc.Client, rs.UID, end)
	}
	if node != "" {
		fakeScheduler(t, c, to, node)
	}
	return rs, e.Run(ctx(t), rs, f.b, w.store, nil), to
}

// fakeScheduler binds every pod of namespace to node (the local API server
// runs no scheduler).
func fakeScheduler(t *testing.T, c context.Context, namespace, node string) {
	cs := kubernetes.NewForConfigOrDie(cfg)
	go func() {
		for c.Err() == nil {
			pods, err := cs.CoreV1().Pods(namespace).List(c, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if p.Spec.NodeName != "" {
						continue
					}
					b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name, UID: p.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
					if err := cs.CoreV1().Pods(namespace).Bind(c, b, metav1.CreateOptions{}); err != nil && c.Err() == nil {
						t.Logf("fake scheduler: %v", err)
					}
				}
			}
			select {
			case <-c.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// nodeAgentPod creates a pod labelled as a node agent in the server's
// namespace on node, in phase.
func nodeAgentPod(t *testing.T, node string, phase corev1.PodPhase) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("node-agent"), Labels: map[string]string{podvolume.NodeAgentRoleLabel: podvolume.NodeAgentRole}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "node-agent", Image: "lifeboat"}}},
	}
	p, err := cs.CoreV1().Pods("velero").Create(ctx(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("velero").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	p.Status.Phase = phase
	if _, err := cs.CoreV1().Pods("velero").UpdateStatus(ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func completeAll(v1.PodVolumeRestore) (v1.PodVolumePhase, string) {
	return v1.PodVolumePhaseCompleted, ""
}

func TestPodVolumesAreRestoredThroughTheNodeAgent(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	rs, out, to := f.restore(t, w, time.Minute, completeAll)
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore: %+v\n%s", out, allErrors(w.results(rs)))
	}
	pod, err := w.cs.CoreV1().Pods(to).Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "restore-wait,setup" {
		t.Errorf("init containers %v, want the stored restore-wait replaced by a new one, first", names)
	}
	wc := pod.Spec.InitContainers[0]
	if wc.Image != "registry.example/lifeboat:test" || strings.Join(wc.Args, ",") != string(rs.UID) ||
		len(wc.VolumeMounts) != 2 || wc.VolumeMounts[0].MountPath != "/restores/cache" || wc.VolumeMounts[1].MountPath != "/restores/data" {
		t.Errorf("restore-wait container: %+v", wc)
	}

	var pvrs v1.PodVolumeRestoreList
	if err := newAccess(t).Client.List(ctx(t), &pvrs, client.InNamespace("velero"), client.MatchingLabels{RestoreUIDLabel: string(rs.UID)}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range pvrs.Items {
		got[p.Spec.Volume] = p.Spec.SnapshotID
		if p.Spec.Pod.Namespace != to || p.Spec.Pod.UID != pod.UID || p.Spec.SourceNamespace != f.from || p.Labels[PodUIDLabel] != string(pod.UID) ||
			!strings.HasPrefix(p.Name, rs.Name+"-") || p.Spec.BackupStorageLocation != "default" || p.Status.Phase != v1.PodVolumePhaseCompleted {
			t.Errorf("PodVolumeRestore %s: %+v %+v", p.Name, p.Spec, p.Status)
		}
	}
	if len(got) != 2 || got["data"] != "snap-data" || got["cache"] != "snap-cache" {
		t.Errorf("PodVolumeRestores by volume: %v, want data and cache only", got)
	}
	if strings.Join(f.ensurer.asked, ",") != f.from+"/default,"+f.from+"/default" {
		t.Errorf("repositories made ready: %v, want the source namespace's in the backup's location", f.ensurer.asked)
	}
}

func TestAFailedPodVolumeRestoreIsAnErrorNamingPodAndVolume(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	rs, out, to := f.restore(t, w, time.Minute, func(p v1.PodVolumeRestore) (v1.PodVolumePhase, string) {
		if p.Spec.Volume == "data" {
			return v1.PodVolumePhaseFailed, "disk full"
		}
		return v1.PodVolumePhaseCompleted, ""
	})
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 1 {
		t.Fatalf("restore: %+v, want PartiallyFailed with one error", out)
	}
	errs := allErrors(w.results(rs))
	if !strings.Contains(errs, "volume data of pod "+to+"/web") || !strings.Contains(errs, "disk full") {
		t.Errorf("errors: %s", errs)
	}
}

func TestAPodVolumeRestoreThatNeverEndsTimesOut(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	start := time.Now()
	rs, out, to := f.restore(t, w, 2*time.Second, func(p v1.PodVolumeRestore) (v1.PodVolumePhase, string) {
		if p.Spec.Volume == "cache" {
			return v1.PodVolumePhaseCompleted, ""
		}
		return "", ""
	})
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 1 {
		t.Fatalf("restore: %+v, want PartiallyFailed with one error", out)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the restore took %s", time.Since(start))
	}
	errs := allErrors(w.results(rs))
	if !strings.Contains(errs, "volume data of pod "+to+"/web") || !strings.Contains(errs, "did not end within 2s") {
		t.Errorf("errors: %s", errs)
	}
}

func TestARepositoryThatIsNotReadyIsAnError(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	f.ensurer.err = errors.New("wrong password")
	rs, out, _ := f.restore(t, w, time.Minute, nil)
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 2 {
		t.Fatalf("restore: %+v, want PartiallyFailed with an error per volume", out)
	}
	if errs := allErrors(w.results(rs)); !strings.Contains(errs, "wrong password") {
		t.Errorf("errors: %s", errs)
	}
}

func TestABadPodVolumeBackupsFileFailsTheRestoreNamingIt(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, []map[string]any{{"spec": map[string]any{"volume": "data"}}})
	_, out, _ := f.restore(t, w, time.Minute, nil)
	if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, storage.PodVolumeBackupsFile(f.b.Name)) {
		t.Fatalf("restore: %+v, want Failed naming the file", out)
	}
	g := podVolumeBackup(t, w, map[string]any{"not": "a list"})
	_, out, _ = g.restore(t, w, time.Minute, nil)
	if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, storage.PodVolumeBackupsFile(g.b.Name)) {
		t.Fatalf("restore: %+v, want Failed naming the file", out)
	}
}

// Velero's pod volume restore action ConfigMap names the wait container's
// image and command; an image without a registry part is ignored.
func TestTheRestoreActionConfigMapOverridesImageAndCommand(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	for _, tc := range []struct{ image, want string }{
		{"mirror.example/tools/lifeboat:v9", "mirror.example/tools/lifeboat:v9"},
		{"lifeboat:v9", "registry.example/lifeboat:test"},
	} {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("fs-restore-action-config"),
				Labels: map[string]string{pluginConfigLabel: "", RestoreActionConfigLabel: "RestoreItemAction"}},
			Data: map[string]string{"image": tc.image, "command": "/bin/wait-here"},
		}
		if _, err := w.cs.CoreV1().ConfigMaps("velero").Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rs, out, to := f.restore(t, w, time.Minute, completeAll)
		_ = w.cs.CoreV1().ConfigMaps("velero").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		if out.Phase != v1.RestorePhaseCompleted {
			t.Fatalf("restore: %+v\n%s", out, allErrors(w.results(rs)))
		}
		pod, err := w.cs.CoreV1().Pods(to).Get(ctx(t), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if wc := pod.Spec.InitContainers[0]; wc.Image != tc.want || strings.Join(wc.Command, " ") != "/bin/wait-here" {
			t.Errorf("ConfigMap image %q: wait container runs %q %v, want %q /bin/wait-here", tc.image, wc.Image, wc.Command, tc.want)
		}
	}
}

// TestAPodVolumeRestoreWithoutANodeAgentFailsFast: the restored pod is
// scheduled on a node where no node agent runs (one runs elsewhere, one
// on the node is not Running yet): each of its volumes fails once the
// short node agent wait is over, long before the restore's timeout, with
// an error naming pod, volume, node and the fix.
func TestAPodVolumeRestoreWithoutANodeAgentFailsFast(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	node := uniq("node")
	nodeAgentPod(t, uniq("other-node"), corev1.PodRunning)
	nodeAgentPod(t, node, corev1.PodPending)
	start := time.Now()
	rs, out, to := f.restoreWith(t, w, &PodVolumeOptions{Timeout: time.Minute, NodeAgentWait: 2 * time.Second}, nil, node)
	took := time.Since(start)
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 2 {
		t.Fatalf("restore: %+v, want PartiallyFailed with an error per volume\n%s", out, allErrors(w.results(rs)))
	}
	if took < 2*time.Second || took > 30*time.Second {
		t.Errorf("the restore took %s, want the node agent wait (2s), not the timeout (1m)", took)
	}
	errs := allErrors(w.results(rs))
	for _, want := range []string{"volume data of pod " + to + "/web", "volume cache of pod " + to + "/web",
		"no node agent runs on node " + node + " ", "lifeboat install --use-node-agent"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors do not say %q:\n%s", want, errs)
		}
	}
}

// TestAPodVolumeRestoreWaitsForARunningNodeAgent: with a node agent
// Running on the pod's node, volumes that take longer than the node agent
// wait are waited for and complete.
func TestAPodVolumeRestoreWaitsForARunningNodeAgent(t *testing.T) {
	w := newWorld(t)
	f := podVolumeBackup(t, w, nil)
	node := uniq("node")
	nodeAgentPod(t, node, corev1.PodRunning)
	var mu sync.Mutex
	first := map[string]time.Time{}
	rs, out, _ := f.restoreWith(t, w, &PodVolumeOptions{Timeout: time.Minute, NodeAgentWait: 500 * time.Millisecond}, func(p v1.PodVolumeRestore) (v1.PodVolumePhase, string) {
		mu.Lock()
		defer mu.Unlock()
		if first[p.Name].IsZero() {
			first[p.Name] = time.Now()
		}
		if time.Since(first[p.Name]) < 2*time.Second {
			return "", ""
		}
		return v1.PodVolumePhaseCompleted, ""
	}, node)
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore: %+v\n%s", out, allErrors(w.results(rs)))
	}
}
