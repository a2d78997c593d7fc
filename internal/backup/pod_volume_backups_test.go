package backup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// readyRepos stands for repository.Ensurer with the server's reconciler:
// every repository is Ready at once; it records what was asked.
type readyRepos struct {
	mu    sync.Mutex
	asked []string
}

func (r *readyRepos) Ensure(_ context.Context, ns, loc string) (*v1.BackupRepository, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, ns+"/"+loc)
	return &v1.BackupRepository{}, nil
}

// fakeNodeAgent ends the PodVolumeBackups of one backup as end says: a
// phase and message for the volume, or "" to leave it running.
func fakeNodeAgent(ctx context.Context, t *testing.T, c crclient.Client, uid types.UID, end func(volume string) (v1.PodVolumePhase, string)) {
	go func() {
		for ctx.Err() == nil {
			var list v1.PodVolumeBackupList
			if err := c.List(ctx, &list, crclient.InNamespace("velero"), crclient.MatchingLabels{v1.BackupUIDLabel: string(uid)}); err == nil {
				for _, p := range list.Items {
					if p.Status.Phase != "" {
						continue
					}
					phase, msg := end(p.Spec.Volume)
					if phase == "" {
						continue
					}
					now := metav1.Now()
					p.Status = v1.PodVolumeBackupStatus{Phase: phase, Message: msg, StartTimestamp: &now, CompletionTimestamp: &now}
					if phase == v1.PodVolumePhaseCompleted {
						p.Status.SnapshotID = "snap-" + p.Spec.Volume
						p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: 4096, BytesDone: 4096}
					}
					if err := c.Update(ctx, &p); err != nil && ctx.Err() == nil {
						t.Logf("fake node agent: %v", err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// podVolumeSetup creates a running pod on node-1 (an emptyDir, a claim on
// an NFS PV, a volume no container mounts) and a node agent pod there.
func podVolumeSetup(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	c := f.engine.Client
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	agent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "node-agent-" + f.ns, Labels: map[string]string{"role": "node-agent", "name": "node-agent"}},
		Spec:       corev1.PodSpec{NodeName: "node-1-" + f.ns, Containers: []corev1.Container{{Name: "node-agent", Image: "lifeboat"}}},
	}
	mustCreate(t, c, agent)
	setRunning(t, c, agent)
	createVolume(t, cs, f.ns, "data", "nfs", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/data"}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"},
		Spec: corev1.PodSpec{
			NodeName: "node-1-" + f.ns,
			Containers: []corev1.Container{{Name: "c", Image: "example", VolumeMounts: []corev1.VolumeMount{
				{Name: "cache", MountPath: "/cache"}, {Name: "data", MountPath: "/data"},
			}}},
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "spare", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	mustCreate(t, c, pod)
	setRunning(t, c, pod)
}

func setRunning(t *testing.T, c crclient.Client, pod *corev1.Pod) {
	t.Helper()
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

func fsBackup(f *fixture, name string) *v1.Backup {
	b := f.backup(name)
	b.UID = types.UID("uid-" + f.ns + "-" + name)
	yes := true
	b.Spec.DefaultVolumesToFsBackup = &yes
	return b
}

func backupResults(t *testing.T, f *fixture, name string) results.Results {
	t.Helper()
	var res results.Results
	if err := f.store.GetGzipJSON(context.Background(), f.store.BackupKey(name, storage.BackupResultsFile(name)), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPodVolumeBackupsCompleted(t *testing.T) {
	f := newFixture(t, 0)
	podVolumeSetup(t, f)
	repos := &readyRepos{}
	f.engine.Repositories = repos
	f.engine.podVolumePoll = 50 * time.Millisecond
	b := fsBackup(f, "fs")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := f.engine.Client
	fakeNodeAgent(ctx, t, c, b.UID, func(string) (v1.PodVolumePhase, string) { return v1.PodVolumePhaseCompleted, "" })

	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed; results %+v", out, backupResults(t, f, "fs"))
	}
	if want := []string{f.ns + "/default"}; !slices.Equal(repos.asked, want) {
		t.Errorf("repositories asked for %v, want %v (once per pod namespace and location)", repos.asked, want)
	}

	// The PodVolumeBackups, as Velero creates them.
	var list v1.PodVolumeBackupList
	if err := c.List(ctx, &list, crclient.InNamespace("velero"), crclient.MatchingLabels{v1.BackupUIDLabel: string(b.UID)}); err != nil {
		t.Fatal(err)
	}
	byVolume := map[string]v1.PodVolumeBackup{}
	for _, p := range list.Items {
		byVolume[p.Spec.Volume] = p
	}
	if len(list.Items) != 2 || byVolume["cache"].Name == "" || byVolume["data"].Name == "" {
		t.Fatalf("PodVolumeBackups for volumes %v, want cache and data", keysOf(byVolume))
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: f.ns, Name: "web"}, pod); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: f.ns, Name: "data"}, pvc); err != nil {
		t.Fatal(err)
	}
	for vol, p := range byVolume {
		if !strings.HasPrefix(p.Name, "fs-") || p.GenerateName != "fs-" {
			t.Errorf("%s: name %q generateName %q, want generated from fs-", vol, p.Name, p.GenerateName)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "Backup" || p.OwnerReferences[0].Name != "fs" || p.OwnerReferences[0].UID != b.UID ||
			p.OwnerReferences[0].Controller == nil || !*p.OwnerReferences[0].Controller || p.OwnerReferences[0].APIVersion != "velero.io/v1" {
			t.Errorf("%s: owner references %+v", vol, p.OwnerReferences)
		}
		if p.Labels[v1.BackupNameLabel] != "fs" || p.Labels[v1.BackupUIDLabel] != string(b.UID) {
			t.Errorf("%s: labels %v", vol, p.Labels)
		}
		s := p.Spec
		if s.Node != "node-1-"+f.ns || s.Pod.Kind != "Pod" || s.Pod.Namespace != f.ns || s.Pod.Name != "web" || s.Pod.UID != pod.UID ||
			s.BackupStorageLocation != "default" || s.UploaderType != "kopia" || s.RepoIdentifier != "" {
			t.Errorf("%s: spec %+v", vol, s)
		}
		wantTags := map[string]string{"backup": "fs", "backup-uid": string(b.UID), "pod": "web", "pod-uid": string(pod.UID), "ns": f.ns, "volume": vol}
		if vol == "data" {
			wantTags["pvc-uid"] = string(pvc.UID)
		}
		if fmt.Sprint(s.Tags) != fmt.Sprint(wantTags) {
			t.Errorf("%s: tags %v, want %v", vol, s.Tags, wantTags)
		}
	}
	if d := byVolume["data"]; d.Annotations[v1.PVCNameAnnotation] != "data" || d.Labels["velero.io/pvc-uid"] != string(pvc.UID) {
		t.Errorf("the claim's PodVolumeBackup has annotations %v labels %v", d.Annotations, d.Labels)
	}
	if cch := byVolume["cache"]; cch.Annotations[v1.PVCNameAnnotation] != "" || cch.Labels["velero.io/pvc-uid"] != "" {
		t.Errorf("the emptyDir's PodVolumeBackup names a claim: %v %v", cch.Annotations, cch.Labels)
	}

	// Stored as Velero stores them.
	var stored []v1.PodVolumeBackup
	if err := f.store.GetGzipJSON(ctx, f.store.BackupKey("fs", storage.PodVolumeBackupsFile("fs")), &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[0].Status.Phase != v1.PodVolumePhaseCompleted || stored[1].Status.Phase != v1.PodVolumePhaseCompleted {
		t.Errorf("stored PodVolumeBackups %+v, want two Completed", stored)
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, f.store, "fs")
	if err != nil {
		t.Fatal(err)
	}
	pvbInfos := map[string]volumefiles.BackupVolumeInfo{}
	for _, in := range infos {
		if in.BackupMethod == volumefiles.PodVolumeBackup {
			pvbInfos[in.PVBInfo.VolumeName] = in
		}
	}
	for _, vol := range []string{"cache", "data"} {
		in, ok := pvbInfos[vol]
		if !ok {
			t.Errorf("no PodVolumeBackup volume info for %s: %+v", vol, infos)
			continue
		}
		p := in.PVBInfo
		if in.Result != volumefiles.ResultSucceeded || in.Skipped || in.StartTimestamp == nil || in.CompletionTimestamp == nil ||
			p.SnapshotHandle != "snap-"+vol || p.Size != 4096 || p.UploaderType != "kopia" || p.PodName != "web" || p.PodNamespace != f.ns ||
			p.NodeName != "node-1-"+f.ns || p.Phase != "Completed" {
			t.Errorf("%s: info %+v pvbInfo %+v", vol, in, p)
		}
	}
	if d := pvbInfos["data"]; d.PVCName != "data" || d.PVName != f.ns+"-data" {
		t.Errorf("the claim's volume info %+v lacks the claim or PV", d)
	}
	res := backupResults(t, f, "fs")
	if w := strings.Join(res.Warnings.Namespaces[f.ns], "\n"); !strings.Contains(w, "web:spare") || !strings.Contains(w, "not mounted") {
		t.Errorf("warnings %q do not say the unmounted volume was skipped", w)
	}
}

func TestPodVolumeBackupFailedOrTimedOut(t *testing.T) {
	f := newFixture(t, 0)
	podVolumeSetup(t, f)
	f.engine.Repositories = &readyRepos{}
	f.engine.podVolumePoll = 50 * time.Millisecond
	c := f.engine.Client

	t.Run("failed", func(t *testing.T) {
		b := fsBackup(f, "fails")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fakeNodeAgent(ctx, t, c, b.UID, func(vol string) (v1.PodVolumePhase, string) {
			if vol == "data" {
				return v1.PodVolumePhaseFailed, "disk on fire"
			}
			return v1.PodVolumePhaseCompleted, ""
		})
		out := f.engine.Run(ctx, b, f.store, nil)
		if out.Phase != v1.BackupPhasePartiallyFailed {
			t.Fatalf("outcome %+v, want PartiallyFailed", out)
		}
		errs := strings.Join(backupResults(t, f, "fails").Errors.Namespaces[f.ns], "\n")
		for _, w := range []string{"web:data", "Failed", "disk on fire"} {
			if !strings.Contains(errs, w) {
				t.Errorf("errors %q do not mention %q", errs, w)
			}
		}
		if strings.Contains(errs, "web:cache") {
			t.Errorf("the completed volume is an error: %q", errs)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		f.engine.FSBackupTimeout = time.Second
		defer func() { f.engine.FSBackupTimeout = 0 }()
		b := fsBackup(f, "slow")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fakeNodeAgent(ctx, t, c, b.UID, func(vol string) (v1.PodVolumePhase, string) {
			if vol == "data" {
				return "", "" // never ends
			}
			return v1.PodVolumePhaseCompleted, ""
		})
		out := f.engine.Run(ctx, b, f.store, nil)
		if out.Phase != v1.BackupPhasePartiallyFailed {
			t.Fatalf("outcome %+v, want PartiallyFailed", out)
		}
		errs := strings.Join(backupResults(t, f, "slow").Errors.Namespaces[f.ns], "\n")
		for _, w := range []string{"web:data", "fs-backup-timeout"} {
			if !strings.Contains(errs, w) {
				t.Errorf("errors %q do not mention %q", errs, w)
			}
		}
		var list v1.PodVolumeBackupList
		if err := c.List(ctx, &list, crclient.InNamespace("velero"), crclient.MatchingLabels{v1.BackupUIDLabel: string(b.UID)}); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if want := p.Spec.Volume == "data"; p.Spec.Cancel != want {
				t.Errorf("%s: spec.cancel %v, want %v", p.Spec.Volume, p.Spec.Cancel, want)
			}
		}
		infos, err := volumefiles.GetVolumeInfo(ctx, f.store, "slow")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.PVBInfo != nil && in.PVBInfo.VolumeName == "data" && (in.Result != volumefiles.ResultFailed || in.PVBInfo.Phase != "Canceled") {
				t.Errorf("the timed-out volume's info %+v %+v, want failed and Canceled", in, in.PVBInfo)
			}
		}
	})

	t.Run("no node agent", func(t *testing.T) {
		if err := c.DeleteAllOf(context.Background(), &corev1.Pod{}, crclient.InNamespace("velero"), crclient.MatchingLabels{"role": "node-agent"}, crclient.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		b := fsBackup(f, "noagent")
		out := f.engine.Run(context.Background(), b, f.store, nil)
		if out.Phase != v1.BackupPhasePartiallyFailed {
			t.Fatalf("outcome %+v, want PartiallyFailed", out)
		}
		errs := strings.Join(backupResults(t, f, "noagent").Errors.Namespaces[f.ns], "\n")
		if !strings.Contains(errs, "no node agent runs on node") {
			t.Errorf("errors %q do not say no node agent runs there", errs)
		}
	})
}

// phaseAtExec records, when a hook runs, the phases of the backup's
// PodVolumeBackups.
type phaseAtExec struct {
	c      crclient.Client
	uid    types.UID
	mu     sync.Mutex
	phases []string
}

func (e *phaseAtExec) Exec(ctx context.Context, _, _, _ string, cmd []string) (string, string, error) {
	var list v1.PodVolumeBackupList
	if err := e.c.List(ctx, &list, crclient.InNamespace("velero"), crclient.MatchingLabels{v1.BackupUIDLabel: string(e.uid)}); err != nil {
		return "", "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var ps []string
	for _, p := range list.Items {
		ps = append(ps, p.Spec.Volume+"="+string(p.Status.Phase))
	}
	slices.Sort(ps)
	e.phases = append(e.phases, strings.Join(cmd, " ")+": "+strings.Join(ps, ","))
	return "", "", nil
}

// TestPostHooksWaitForPodVolumeBackups: as in Velero, a pod's post hooks
// run once its PodVolumeBackups ended, its pre hooks before they exist.
func TestPostHooksWaitForPodVolumeBackups(t *testing.T) {
	f := newFixture(t, 0)
	podVolumeSetup(t, f)
	c := f.engine.Client
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), crclient.ObjectKey{Namespace: f.ns, Name: "web"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{"pre.hook.backup.velero.io/command": `["freeze"]`, "post.hook.backup.velero.io/command": `["thaw"]`}
	if err := c.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	f.engine.Repositories = &readyRepos{}
	f.engine.podVolumePoll = 50 * time.Millisecond
	b := fsBackup(f, "hooked")
	ex := &phaseAtExec{c: c, uid: b.UID}
	f.engine.Hooks = ex
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeNodeAgent(ctx, t, c, b.UID, func(string) (v1.PodVolumePhase, string) {
		time.Sleep(200 * time.Millisecond) // the hooks must wait for this
		return v1.PodVolumePhaseCompleted, ""
	})
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed", out)
	}
	want := []string{"freeze: ", "thaw: cache=Completed,data=Completed"}
	if !slices.Equal(ex.phases, want) {
		t.Errorf("hooks ran with the pod volume backups at %q, want %q", ex.phases, want)
	}
}
