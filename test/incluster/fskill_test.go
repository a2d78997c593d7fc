package incluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/upload"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
)

// TestKillingTheNodeAgentMidUploadLosesNothingSilently: the node agent is
// SIGKILLed on the real node while it uploads a pod's 1 GiB emptyDir, after
// kopia has saved checkpoints of the upload (the node agent's hidden
// --checkpoint-interval makes that seconds, not 45 minutes). The DaemonSet's
// next node agent marks the PodVolumeBackup Failed, saying it restarted
// mid-transfer; the backup ends PartiallyFailed with an error naming the pod
// and the volume, never Completed; the repository holds no complete
// snapshot of it, only the checkpoints, tagged with the backup. Deleting
// the backup leaves nothing of it: no object, no file, no snapshot manifest
// tagged with its name or UID, complete or not.
func TestKillingTheNodeAgentMidUploadLosesNothingSilently(t *testing.T) {
	store := installWithNodeAgent(t)
	checkpointEverySecond(t)

	const ns, backupName = "fskill", "fskill-1"
	testNamespace(t, ns)
	pod := shellPod(ns)
	// 1 GiB of incompressible data: an upload of several seconds on this
	// machine, long enough to see it running and kill it.
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c",
		`for i in 1 2 3 4; do /bin/busybox dd if=/dev/urandom of=/data/f$i bs=1048576 count=256 2>/dev/null; done
/bin/busybox sync; /bin/busybox touch /data/.filled; exec /bin/busybox sleep 3600`}
	create(t, pod)
	waitPodRunning(t, ns, pod.Name)
	poll(t, "the pod to write 1 GiB into its emptyDir", func(context.Context) (bool, error) {
		return strings.Contains(execIn(t, ns, pod.Name, "/bin/busybox", "ls", "-a", "/data"), ".filled"), nil
	})

	repos := &repository.Manager{
		Storage: &locations.Resolver{Client: admin, SecretReader: admin, Namespace: serverNamespace},
		Secrets: admin, Namespace: serverNamespace, WorkDir: t.TempDir(),
	}
	t.Cleanup(func() { _ = repos.Close(context.Background()) })
	var bsl v1.BackupStorageLocation
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: install.LocationName}, &bsl)
	repo := podvolume.Repository{Location: &bsl, VolumeNamespace: ns}

	yes := true
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: backupName},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, DefaultVolumesToFsBackup: &yes}}
	create(t, b)
	uid := string(b.UID)

	// Running, some bytes done, and at least one checkpoint in the
	// repository: then the kill.
	var pvb v1.PodVolumeBackup
	var seen []*snapshot.Manifest
	start := time.Now()
	poll(t, "the upload to be under way with a checkpoint saved", func(c context.Context) (bool, error) {
		var list v1.PodVolumeBackupList
		if err := admin.List(c, &list, client.InNamespace(serverNamespace), client.MatchingLabels{v1.BackupNameLabel: backupName}); err != nil || len(list.Items) == 0 {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, fmt.Errorf("%d PodVolumeBackups, want one (the pod's emptyDir)", len(list.Items))
		}
		pvb = list.Items[0]
		switch pvb.Status.Phase {
		case v1.PodVolumePhaseCompleted, v1.PodVolumePhaseFailed, v1.PodVolumePhaseCanceled:
			return false, fmt.Errorf("the PodVolumeBackup ended %s (%q) %s after the backup started, before the test killed the node agent",
				pvb.Status.Phase, pvb.Status.Message, time.Since(start).Round(time.Millisecond))
		case v1.PodVolumePhaseInProgress:
		default:
			return false, nil
		}
		if pvb.Status.Progress.BytesDone == 0 {
			return false, nil
		}
		// InProgress: the server made the repository before it created
		// the PodVolumeBackup.
		seen = snapshotsOf(t, repos, repo, backupName, uid)
		return len(seen) > 0, nil
	})
	t.Logf("upload at %d of %d bytes, %d checkpoint(s), %s after the backup started: killing the node agent",
		pvb.Status.Progress.BytesDone, pvb.Status.Progress.TotalBytes, len(seen), time.Since(start).Round(time.Millisecond))
	restarts := killNodeAgent(t)

	waitFor(t, &pvb, "the next node agent to mark the PodVolumeBackup", func(p *v1.PodVolumeBackup) bool {
		return p.Status.Phase != v1.PodVolumePhaseInProgress
	})
	if pvb.Status.Phase != v1.PodVolumePhaseFailed || !strings.Contains(pvb.Status.Message, "restarted while this transfer was InProgress") {
		t.Errorf("PodVolumeBackup %s %q: want Failed, saying the node agent restarted mid-transfer", pvb.Status.Phase, pvb.Status.Message)
	}
	if pvb.Status.SnapshotID != "" {
		t.Errorf("the killed transfer's PodVolumeBackup records snapshot %s", pvb.Status.SnapshotID)
	}
	agent := nodeAgentPod(t)
	if cs := nodeAgentStatus(t, agent); cs.RestartCount <= restarts {
		t.Errorf("node agent container restarts %d, before the kill %d: the DaemonSet's pod did not restart it", cs.RestartCount, restarts)
	}

	waitFor(t, b, "the backup to end", func(b *v1.Backup) bool {
		switch b.Status.Phase {
		case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed, v1.BackupPhaseFailed, v1.BackupPhaseFailedValidation:
			return true
		}
		return false
	})
	if b.Status.Phase != v1.BackupPhasePartiallyFailed {
		t.Fatalf("backup %s (%d errors, %q): want PartiallyFailed, a volume was lost", b.Status.Phase, b.Status.Errors, b.Status.FailureReason)
	}
	results := gunzip(t, filepath.Join(store, "backups", "backups", backupName, storage.BackupResultsFile(backupName)))
	if want := fmt.Sprintf("pod volume %s/%s:data: PodVolumeBackup %s ended Failed: the node agent on node", ns, pod.Name, pvb.Name); !strings.Contains(results, want) ||
		!strings.Contains(results, "restarted while this transfer was InProgress") {
		t.Errorf("the backup's results:\n%s\nwant an error naming the pod, the volume and the node agent's restart (%q)", results, want)
	}

	// The repository holds the checkpoints the killed upload left, tagged
	// with the backup as the final snapshot would have been, and no
	// complete snapshot of it.
	left := snapshotsOf(t, repos, repo, backupName, uid)
	if len(left) == 0 {
		t.Error("the killed upload's checkpoints are gone before the deletion: nothing shows that the deletion forgets them")
	}
	for _, m := range left {
		if m.IncompleteReason != upload.IncompleteReasonCheckpoint {
			t.Errorf("snapshot %s of the killed upload: incomplete reason %q, want a checkpoint (never a complete snapshot)", m.ID, m.IncompleteReason)
		}
		if m.Tags["pod"] != pod.Name || m.Tags["volume"] != "data" || m.Tags["ns"] != ns || m.Tags["backup"] != backupName || m.Tags["backup-uid"] != uid {
			t.Errorf("checkpoint %s tags %v: want the backup's, pod's and volume's", m.ID, m.Tags)
		}
	}

	plan := lifeboat(t, "backup", "delete", backupName, "--dry-run")
	if want := fmt.Sprintf("in the repository of namespace %s in location %s (backup-uid %s)", ns, install.LocationName, uid); !strings.Contains(plan, want) {
		t.Errorf("dry run:\n%s\nwant it to name the repository searched for the backup's checkpoints (%q)", plan, want)
	}
	if out, err := clitest.Run(node.Kubeconfig, nil, "backup", "delete", backupName, "--confirm", "--wait", "--timeout", "2m"); err != nil {
		var reqs v1.DeleteBackupRequestList
		_ = admin.List(ctx(t), &reqs, client.InNamespace(serverNamespace))
		t.Fatalf("backup delete: %v\n%s\nrequests: %+v\nserver log:\n%s", err, out, reqs.Items, serverLog(t))
	}
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(b), &v1.Backup{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Backup after its deletion: %v, want it gone", err)
	}
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(&pvb), &v1.PodVolumeBackup{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PodVolumeBackup after the deletion: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(store, "backups", "backups", backupName)); !os.IsNotExist(err) {
		t.Errorf("the backup's files after the deletion: %v, want them gone", err)
	}
	if got := snapshotsOf(t, repos, repo, backupName, uid); len(got) != 0 {
		for _, m := range got {
			t.Errorf("snapshot %s (incomplete %q, tags %v) of the deleted backup is still in the repository", m.ID, m.IncompleteReason, m.Tags)
		}
	}
}

// checkpointEverySecond restarts the node agent with kopia's checkpoints a
// second apart, and waits until that one runs.
func checkpointEverySecond(t *testing.T) {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: install.NodeAgentName}, ds)
	orig := ds.DeepCopy()
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--checkpoint-interval=1s")
	if err := admin.Patch(ctx(t), ds, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatalf("giving the node agent a checkpoint interval: %v", err)
	}
	waitFor(t, ds, "the node agent with a checkpoint interval to be ready", func(d *appsv1.DaemonSet) bool {
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedNumberScheduled == 1 && d.Status.NumberReady == 1 &&
			d.Status.NumberUnavailable == 0 && d.Status.CurrentNumberScheduled == 1
	})
	poll(t, "the node agent pod with the new arguments to be the only one, ready", func(c context.Context) (bool, error) {
		var pods corev1.PodList
		if err := admin.List(c, &pods, client.InNamespace(serverNamespace), client.MatchingLabels(install.NodeAgentSelector())); err != nil {
			return false, err
		}
		if len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
			return false, nil
		}
		p := pods.Items[0]
		ready := false
		for _, cs := range p.Status.ContainerStatuses {
			ready = ready || (cs.Name == install.NodeAgentName && cs.Ready)
		}
		return ready && slices.Contains(p.Spec.Containers[0].Args, "--checkpoint-interval=1s"), nil
	})
}

func nodeAgentPod(t *testing.T) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := admin.List(ctx(t), &pods, client.InNamespace(serverNamespace), client.MatchingLabels(install.NodeAgentSelector())); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the node agent's pod: %v (%d pods)", err, len(pods.Items))
	}
	return &pods.Items[0]
}

func nodeAgentStatus(t *testing.T, p *corev1.Pod) corev1.ContainerStatus {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == install.NodeAgentName {
			return cs
		}
	}
	t.Fatalf("pod %s has no status of container %s", p.Name, install.NodeAgentName)
	return corev1.ContainerStatus{}
}

// killNodeAgent SIGKILLs the node agent's process, found from this host as
// the kubelet runs it: the container ID in the pod's status, then the
// process whose cgroup names that container and whose command line is the
// node agent's. It returns the container's restart count before the kill.
func killNodeAgent(t *testing.T) int32 {
	t.Helper()
	cs := nodeAgentStatus(t, nodeAgentPod(t))
	_, id, ok := strings.Cut(cs.ContainerID, "://")
	if !ok || len(id) < 12 || cs.State.Running == nil {
		t.Fatalf("node agent container %+v: want a running one with an ID", cs)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	var inCgroup []string
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !bytes.Contains(cg, []byte(id)) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
		inCgroup = append(inCgroup, fmt.Sprintf("%d %v", pid, args))
		if slices.Contains(args, "node-agent") {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("processes of container %s: %v; want exactly one running `lifeboat node-agent`", id, inCgroup)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatalf("killing the node agent (pid %d): %v", pids[0], err)
	}
	t.Logf("node agent pid %d (container %.12s) killed", pids[0], id)
	return cs.RestartCount
}

// snapshotsOf lists the snapshot manifests in the repository tagged with
// the backup's name or UID, as the repository is now.
func snapshotsOf(t *testing.T, repos *repository.Manager, r podvolume.Repository, name, uid string) []*snapshot.Manifest {
	t.Helper()
	rep, release, err := repos.Open(ctx(t), r)
	if err != nil {
		t.Fatalf("opening the repository of %s: %v", r.VolumeNamespace, err)
	}
	defer release()
	if err := rep.Refresh(ctx(t)); err != nil {
		t.Fatal(err)
	}
	ids, err := snapshot.ListSnapshotManifests(ctx(t), rep, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mans, err := snapshot.LoadSnapshots(ctx(t), rep, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(mans) != len(ids) {
		t.Fatalf("%d of the repository's %d snapshot manifests could not be read", len(ids)-len(mans), len(ids))
	}
	var out []*snapshot.Manifest
	for _, m := range mans {
		if m.Tags["backup"] == name || m.Tags["backup-uid"] == uid {
			out = append(out, m)
		}
	}
	return out
}
