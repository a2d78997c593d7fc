package incluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hostpods"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/restore"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// veleroNamespace is where Velero's own server runs its objects, apart
// from Lifeboat's (serverNamespace): the two servers share the cluster's
// velero.io CRDs and the bucket, nothing else.
const veleroNamespace = "velero-made"

// TestVeleroMadeFileSystemBackupRestores: a file-system backup written by
// Velero v1.18.3's own server code (`velero server`, built from Velero's
// module by test/compat/build.sh, with Velero's AWS object store plugin
// velero-plugin-for-aws v1.14.3) into an S3 bucket, its volumes' data
// stored by Velero's own uploader and repository code (velerokopia), is
// restored by Lifeboat on the real node: Lifeboat's sync brings the backup
// in, its restore brings the pod back through its node agent, and the
// restored pod reads back every file with the md5 sum the original pod
// read.
//
// What is Velero's and what is the test's: the tarball, velero-backup.json,
// the <backup>-podvolumebackups.json.gz and every other backup file, the
// PodVolumeBackups, the BackupRepository and the kopia repository are made
// by Velero's server code; each volume's snapshot by Velero's kopia
// uploader and unified repository provider. Velero's node agent is not
// run: v1.18 moves each volume in a pod of Velero's image, which cannot be
// built here. The test plays that part: a DaemonSet node-agent of the test
// shell labelled role=node-agent is what Velero's backup looks for on the
// pod's node, and the test's loop takes each PodVolumeBackup through the
// phases Velero's node agent writes (Accepted, Prepared, InProgress,
// Completed, with its timestamps, path, progress, snapshot ID and
// incremental size), backing the volume's directory on this host up with
// velerokopia as Velero's node agent backs it up (source
// <ns>/<pod>/<claim or volume>, no tags but the uploader's own). That state
// machine is the test's; the code that reads and writes the data and the
// backup's files is Velero's.
func TestVeleroMadeFileSystemBackupRestores(t *testing.T) {
	installWithNodeAgent(t)
	bins := veleroBinaries(t)
	srv := s3server.Start(t, s3server.WithHost(node.IP))
	bucket := srv.NewBucket(t)
	const prefix = "cluster-a"

	vs := startVeleroServer(t, bins, srv, bucket, prefix)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Velero's server log (last 12 KiB):\n%s", vs.logTail(12<<10))
			t.Logf("Lifeboat's server log:\n%s", podLogTail(serverNamespace, install.ServerSelector(), install.ServerName, 8<<10))
			t.Logf("Lifeboat's node agent log:\n%s", podLogTail(serverNamespace, install.NodeAgentSelector(), install.NodeAgentName, 8<<10))
		}
	})

	// The app: one Deployment whose pod fills two emptyDirs, many small
	// files in nested directories and a few larger ones (about 2 MiB in
	// all), then marks them filled. Written once: the restored pod must
	// find the restored files, not write new ones.
	const ns = "velero-fs-app"
	testNamespace(t, ns)
	const fill = `[ -e /data/.filled ] || {
  for d in 0 1 2 3; do /bin/busybox mkdir -p /data/dir$d/sub; for i in $(/bin/busybox seq 1 40); do echo "data $d $i $RANDOM" > /data/dir$d/f$i; echo "$i" > /data/dir$d/sub/g$i; done; done
  /bin/busybox dd if=/dev/urandom of=/data/big bs=1024 count=1024 2>/dev/null
  /bin/busybox dd if=/dev/urandom of=/data/dir2/medium bs=1024 count=300 2>/dev/null
  for i in $(/bin/busybox seq 1 20); do echo "log line $i $RANDOM" > /logs/app-$i.log; done
  /bin/busybox dd if=/dev/urandom of=/logs/archive bs=1024 count=512 2>/dev/null
  /bin/busybox sync; /bin/busybox touch /data/.filled; }
exec /bin/busybox sleep 3600`
	labels := map[string]string{"app": "velero-fs-web"}
	pod := shellPod(ns)
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c", fill}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "logs", MountPath: "/logs"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	})
	podName := waitAppPod(t, ns, labels)
	before := volumeSums(t, ns, podName)
	// data: 4 directories of 40 files and 40 more in a subdirectory, two
	// larger files and .filled; logs: 20 files and one larger.
	if n := strings.Count(before, "\n"); n != 344 {
		t.Fatalf("the pod's volumes hold %d files, want the 344 it writes:\n%s", n, before)
	}

	// Velero backs the namespace up, its pod volumes by file-system
	// backup, while the test plays its node agent.
	yes := true
	vb := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "velero-fs-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: "default", DefaultVolumesToFsBackup: &yes}}
	create(t, vb)
	agent := &veleroNodeAgent{
		bin: bins.velerokopia, home: t.TempDir(), node: nodeName(t), root: filepath.Join(node.KubeletDir(), "pods"),
		s3URL: vs.s3URL, bucket: bucket, prefix: prefix, credentials: vs.credentialsFile, password: vs.repoPassword(t),
		done: map[string]bool{},
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 6*time.Minute, true, func(c context.Context) (bool, error) {
		if err := agent.serve(c); err != nil {
			return false, err
		}
		if err := admin.Get(c, client.ObjectKeyFromObject(vb), vb); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		switch vb.Status.Phase {
		case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed, v1.BackupPhaseFailed, v1.BackupPhaseFailedValidation:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Velero's backup (phase %q after %s): %v", vb.Status.Phase, time.Since(start).Round(time.Second), err)
	}
	t.Logf("Velero's backup %s in %s (%d warnings)", vb.Status.Phase, time.Since(start).Round(time.Millisecond), vb.Status.Warnings)
	if vb.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("Velero's backup is %s (%d errors, %d warnings, %q)", vb.Status.Phase, vb.Status.Errors, vb.Status.Warnings, vb.Status.FailureReason)
	}

	var pvbs v1.PodVolumeBackupList
	if err := admin.List(ctx(t), &pvbs, client.InNamespace(veleroNamespace), client.MatchingLabels{v1.BackupNameLabel: vb.Name}); err != nil {
		t.Fatal(err)
	}
	snapshots := map[string]string{} // volume -> snapshot ID
	for _, p := range pvbs.Items {
		if p.Status.Phase != v1.PodVolumePhaseCompleted || p.Status.SnapshotID == "" || p.Spec.Pod.Name != podName {
			t.Errorf("Velero's PodVolumeBackup %s of %s/%s: %s %q, snapshot %q", p.Name, p.Spec.Pod.Name, p.Spec.Volume, p.Status.Phase, p.Status.Message, p.Status.SnapshotID)
		}
		snapshots[p.Spec.Volume] = p.Status.SnapshotID
	}
	if len(pvbs.Items) != 2 || snapshots["data"] == "" || snapshots["logs"] == "" {
		t.Fatalf("Velero made %d PodVolumeBackups (%v), want one for data and one for logs", len(pvbs.Items), snapshots)
	}
	if !slices.Equal(agent.handled(), []string{"data", "logs"}) {
		t.Errorf("the test's node agent backed up volumes %v, want data and logs", agent.handled())
	}

	// Velero's files in the bucket, the PodVolumeBackups file among them
	// with the snapshots the node agent reported.
	dir := prefix + "/backups/" + vb.Name + "/"
	keys := srv.Keys(t, bucket, dir)
	for _, want := range []string{"velero-backup.json", vb.Name + ".tar.gz", storage.PodVolumeBackupsFile(vb.Name)} {
		if !slices.Contains(keys, dir+want) {
			t.Fatalf("Velero's backup has no %s in the bucket; it has %v", want, keys)
		}
	}
	var stored []v1.PodVolumeBackup
	if err := json.Unmarshal([]byte(gunzip(t, filepath.Join(srv.Dir, bucket, dir+storage.PodVolumeBackupsFile(vb.Name)))), &stored); err != nil {
		t.Fatalf("Velero's %s: %v", storage.PodVolumeBackupsFile(vb.Name), err)
	}
	for _, p := range stored {
		if p.Status.Phase != v1.PodVolumePhaseCompleted || snapshots[p.Spec.Volume] != p.Status.SnapshotID {
			t.Errorf("stored PodVolumeBackup of %s: %s, snapshot %q; want Completed with %q", p.Spec.Volume, p.Status.Phase, p.Status.SnapshotID, snapshots[p.Spec.Volume])
		}
	}
	if len(stored) != 2 {
		t.Fatalf("Velero stored %d PodVolumeBackups, want 2", len(stored))
	}
	// The repository Velero's server created for the namespace (its
	// BackupRepository made Ready before any PodVolumeBackup was), where
	// Lifeboat's data path will find the snapshots.
	var repos v1.BackupRepositoryList
	if err := admin.List(ctx(t), &repos, client.InNamespace(veleroNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(repos.Items) != 1 || repos.Items[0].Spec.VolumeNamespace != ns || repos.Items[0].Spec.RepositoryType != "kopia" ||
		repos.Items[0].Status.Phase != repository.PhaseReady {
		t.Errorf("Velero's BackupRepositories: %+v, want one Ready kopia repository of %s", repos.Items, ns)
	}
	if repo := srv.Keys(t, bucket, prefix+"/kopia/"+ns+"/"); !slices.Contains(repo, prefix+"/kopia/"+ns+"/kopia.repository") {
		t.Fatalf("no kopia repository of %s in the bucket: %v", ns, repo)
	}

	// Lifeboat: a location on the same bucket and prefix; its sync brings
	// Velero's backup in.
	const location = "velero-made"
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "velero-made-s3"},
		Data:       map[string][]byte{"cloud": srv.CredentialsFile()},
	})
	create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: location},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "aws",
			Config:   vs.bslConfig(),
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{
				Bucket: bucket, Prefix: prefix,
			}},
			Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "velero-made-s3"}, Key: "cloud"},
		},
	})
	synced := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: vb.Name}}
	waitFor(t, synced, "Lifeboat's sync to bring Velero's backup in", func(b *v1.Backup) bool {
		return b.Status.Phase == v1.BackupPhaseCompleted
	})
	if synced.Spec.StorageLocation != location {
		t.Errorf("the synced backup's location is %q, want %q", synced.Spec.StorageLocation, location)
	}

	if err := admin.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the app's namespace to be gone", func(c context.Context) (bool, error) {
		err := admin.Get(c, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})

	start = time.Now()
	out := lifeboat(t, "restore", "create", "velero-fs-1", "--from-backup", vb.Name, "--wait")
	rs := &v1.Restore{}
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: "velero-fs-1"}, rs)
	t.Logf("Lifeboat's restore %s in %s", rs.Status.Phase, time.Since(start).Round(time.Millisecond))
	if rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("Lifeboat's restore of Velero's backup is %s (%q, %d errors):\n%s\n%s", rs.Status.Phase, rs.Status.FailureReason, rs.Status.Errors,
			out, lifeboat(t, "restore", "describe", rs.Name, "--details"))
	}
	var pvrs v1.PodVolumeRestoreList
	if err := admin.List(ctx(t), &pvrs, client.InNamespace(serverNamespace), client.MatchingLabels{restore.RestoreUIDLabel: string(rs.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pvrs.Items {
		if p.Status.Phase != v1.PodVolumePhaseCompleted || p.Spec.SnapshotID != snapshots[p.Spec.Volume] {
			t.Errorf("PodVolumeRestore %s of %s: %s %q from snapshot %q, want Completed from Velero's %q",
				p.Name, p.Spec.Volume, p.Status.Phase, p.Status.Message, p.Spec.SnapshotID, snapshots[p.Spec.Volume])
		}
	}
	if len(pvrs.Items) != 2 {
		t.Fatalf("%d PodVolumeRestores, want one per volume of Velero's backup (2)", len(pvrs.Items))
	}

	restored := waitAppPod(t, ns, labels)
	if after := volumeSums(t, ns, restored); after != before {
		t.Errorf("the restored pod reads:\n%.2000s\nwant what the original pod read:\n%.2000s", after, before)
	}
}

// volumeSums is the pod's own md5sum of every file of its two volumes,
// sorted by path; the done markers a restore leaves (.velero/, as Velero's
// do) are not the app's files. The sums are read 150 files at a time:
// execIn keeps 16 KiB of a command's output, the hooks' limit.
func volumeSums(t *testing.T, ns, pod string) string {
	t.Helper()
	const list = "cd / && /bin/busybox find data logs -path data/.velero -prune -o -path logs/.velero -prune -o -type f -print | /bin/busybox sort"
	var all strings.Builder
	for first := 1; first < 3000; first += 150 {
		out := execIn(t, ns, pod, "/bin/busybox", "sh", "-c",
			fmt.Sprintf("%s | /bin/busybox sed -n '%d,%dp' | /bin/busybox xargs -r /bin/busybox md5sum", list, first, first+149))
		if out == "" {
			return all.String()
		}
		all.WriteString(out)
	}
	t.Fatalf("pod %s/%s: still more files after 3000:\n%.2000s", ns, pod, all.String())
	return ""
}

// waitAppPod waits until the app has exactly one pod, Running, its
// volumes filled (.filled written), and returns its name.
func waitAppPod(t *testing.T, ns string, labels map[string]string) string {
	t.Helper()
	var name string
	poll(t, "the app's pod to run with its volumes filled", func(c context.Context) (bool, error) {
		var pods corev1.PodList
		if err := admin.List(c, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil || len(pods.Items) != 1 {
			return false, err
		}
		p := pods.Items[0]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false, nil
		}
		name = p.Name
		return strings.Contains(execIn(t, ns, name, "/bin/busybox", "ls", "-a", "/data"), ".filled"), nil
	})
	return name
}

// veleroTools are the binaries built from Velero's own modules.
type veleroTools struct {
	velero      string // Velero v1.18.3's CLI and server (test/compat/build.sh velero)
	velerokopia string // its file-system backup code (test/compat/build.sh velerokopia)
	awsPlugin   string // velero-plugin-for-aws (hack/tools/velero-plugin-for-aws)
}

// veleroBinaries builds (or finds in the cache) the binaries, as `make
// tools` does.
func veleroBinaries(t *testing.T) veleroTools {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	build := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return strings.TrimSpace(stdout.String())
	}
	return veleroTools{
		velero:      build("test/compat/build.sh", "velero"),
		velerokopia: build("test/compat/build.sh", "velerokopia"),
		awsPlugin:   build("hack/gotool.sh", "velero-plugin-for-aws", "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"),
	}
}

// veleroServer is `velero server` running on this host against the node's
// API server, in veleroNamespace.
type veleroServer struct {
	cmd             *exec.Cmd
	exited          chan struct{}
	logPath         string
	s3URL           string
	credentialsFile string // the bucket's credentials, for velerokopia
}

func (v *veleroServer) bslConfig() map[string]string {
	return map[string]string{"region": s3server.Region, "s3Url": v.s3URL, "s3ForcePathStyle": "true"}
}

// startVeleroServer sets up Velero's namespace as a Velero user's install
// leaves it (the BSL "default" on the bucket, its credentials Secret, a
// node agent on the node: see veleroNodeAgent), starts `velero server`
// with the AWS plugin in its plugin directory, waits until Velero finds
// the location Available, and stops the server when the test ends.
func startVeleroServer(t *testing.T, bins veleroTools, srv *s3server.Server, bucket, prefix string) *veleroServer {
	t.Helper()
	testNamespace(t, veleroNamespace)
	dir := t.TempDir()
	v := &veleroServer{logPath: filepath.Join(dir, "velero.log"), s3URL: srv.Endpoint, credentialsFile: filepath.Join(dir, "cloud")}
	if err := os.WriteFile(v.credentialsFile, srv.CredentialsFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "cloud-credentials"},
		Data:       map[string][]byte{"cloud": srv.CredentialsFile()},
	})
	create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "default"},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "aws",
			Default:  true,
			Config:   v.bslConfig(),
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{
				Bucket: bucket, Prefix: prefix,
			}},
			Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-credentials"}, Key: "cloud"},
		},
	})
	// What Velero's backup checks before it hands a pod's volumes over
	// (nodeagent.IsRunningInNode): a Running pod labelled role=node-agent
	// in its namespace on the pod's node; its server warns at start
	// without the DaemonSet node-agent. Only the test shell sleeps in it.
	agentLabels := map[string]string{"name": "node-agent", "role": "node-agent"}
	create(t, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "node-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agentLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: agentLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "node-agent", Image: images["lifeboat-test-shell"], ImagePullPolicy: corev1.PullNever,
						Command: []string{"/bin/busybox", "sleep", "3600"},
					}},
					TerminationGracePeriodSeconds: new(int64),
				},
			},
		},
	})
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "node-agent"}}
	waitFor(t, ds, "Velero's stand-in node agent pod to run", func(d *appsv1.DaemonSet) bool {
		return d.Status.DesiredNumberScheduled == 1 && d.Status.NumberReady == 1
	})

	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy, not a link: Velero's plugin registry takes regular
	// executable files.
	if err := copyFile(bins.awsPlugin, filepath.Join(plugins, "velero-plugin-for-aws"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(v.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	metricsPort, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	v.cmd = exec.Command(bins.velero, "server",
		"--kubeconfig", node.Kubeconfig, "--namespace", veleroNamespace,
		"--plugin-dir", plugins, "--uploader-type", "kopia",
		// Its own port on loopback, and no profiler: Lifeboat's pods
		// and other processes of the machine keep theirs.
		"--metrics-address", "127.0.0.1:"+strconv.Itoa(metricsPort), "--profiler-address", "",
		"--store-validation-frequency", "10s", "--log-level", "info")
	// HOME holds Velero's repository configs, TMPDIR its credential
	// files: the test's directories, not the machine's.
	v.cmd.Env = append(os.Environ(), "HOME="+home, "TMPDIR="+dir)
	v.cmd.Stdout, v.cmd.Stderr = logFile, logFile
	// A group of its own, the plugins' processes with it, so stopping it
	// stops them; and it dies with the test process.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("starting velero server: %v", err)
	}
	v.exited = make(chan struct{})
	go func() { _ = v.cmd.Wait(); close(v.exited) }()
	t.Cleanup(v.stop)

	bsl := &v1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: veleroNamespace, Name: "default"}}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(c context.Context) (bool, error) {
		select {
		case <-v.exited:
			return false, errors.New("velero server exited")
		default:
		}
		if err := admin.Get(c, client.ObjectKeyFromObject(bsl), bsl); err != nil {
			return false, err
		}
		return bsl.Status.Phase == v1.BackupStorageLocationPhaseAvailable, nil
	})
	if err != nil {
		t.Fatalf("Velero's server finding its location Available (phase %q, %q): %v\nlog:\n%s", bsl.Status.Phase, bsl.Status.Message, err, v.logTail(8<<10))
	}
	return v
}

// repoPassword is the repository password as Velero's server keeps it:
// the Secret it creates at start when missing (Velero's default password,
// Lifeboat's too).
func (v *veleroServer) repoPassword(t *testing.T) string {
	t.Helper()
	var s corev1.Secret
	get(t, client.ObjectKey{Namespace: veleroNamespace, Name: "velero-repo-credentials"}, &s)
	if len(s.Data["repository-password"]) == 0 {
		t.Fatalf("Velero's Secret velero-repo-credentials has no repository-password")
	}
	return string(s.Data["repository-password"])
}

// stop ends the server and its plugins: SIGTERM, then SIGKILL after 15 s.
func (v *veleroServer) stop() {
	pgid := v.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-v.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-v.exited
	}
	// Plugins left in the group by a server that exited first.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (v *veleroServer) logTail(n int64) string {
	f, err := os.Open(v.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// veleroNodeAgent plays Velero v1.18.3's node agent for the
// PodVolumeBackups of this node: the phases and status fields as
// pkg/controller/pod_volume_backup_controller.go writes them, the data
// moved by Velero's own uploader (velerokopia) as its pod volume backup
// micro service moves it.
type veleroNodeAgent struct {
	bin, home, node, root                        string
	s3URL, bucket, prefix, credentials, password string
	done                                         map[string]bool // PodVolumeBackup name -> handled
	volumes                                      []string
}

func (a *veleroNodeAgent) handled() []string {
	v := slices.Clone(a.volumes)
	slices.Sort(v)
	return v
}

// serve takes each new PodVolumeBackup of its node through to Completed.
func (a *veleroNodeAgent) serve(ctx context.Context) error {
	var list v1.PodVolumeBackupList
	if err := admin.List(ctx, &list, client.InNamespace(veleroNamespace)); err != nil {
		return fmt.Errorf("listing Velero's PodVolumeBackups: %w", err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if a.done[p.Name] || p.Spec.Node != a.node || (p.Status.Phase != "" && p.Status.Phase != v1.PodVolumePhaseNew) {
			continue
		}
		a.done[p.Name] = true
		if err := a.backup(ctx, p); err != nil {
			return fmt.Errorf("PodVolumeBackup %s (%s/%s volume %s): %w", p.Name, p.Spec.Pod.Namespace, p.Spec.Pod.Name, p.Spec.Volume, err)
		}
		a.volumes = append(a.volumes, p.Spec.Volume)
	}
	return nil
}

func (a *veleroNodeAgent) backup(ctx context.Context, p *v1.PodVolumeBackup) error {
	key := client.ObjectKeyFromObject(p)
	const exposing = "velero.io/expose-on-going" // exposer.ExposeOnGoingLabel
	if err := updatePVB(ctx, key, func(p *v1.PodVolumeBackup) {
		p.Status.Phase = v1.PodVolumePhaseAccepted
		p.Status.AcceptedTimestamp = &metav1.Time{Time: time.Now()}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[exposing] = "true"
	}); err != nil {
		return err
	}
	var pod corev1.Pod
	if err := admin.Get(ctx, client.ObjectKey{Namespace: p.Spec.Pod.Namespace, Name: p.Spec.Pod.Name}, &pod); err != nil {
		return fmt.Errorf("reading the pod: %w", err)
	}
	path, _, err := hostpods.Resolve(ctx, admin, a.root, &pod, p.Spec.Volume)
	if err != nil {
		return err
	}
	if err := updatePVB(ctx, key, func(p *v1.PodVolumeBackup) { p.Status.Phase = v1.PodVolumePhasePrepared }); err != nil {
		return err
	}
	if err := updatePVB(ctx, key, func(p *v1.PodVolumeBackup) {
		p.Status.Phase = v1.PodVolumePhaseInProgress
		p.Status.StartTimestamp = &metav1.Time{Time: time.Now()}
	}); err != nil {
		return err
	}

	args := []string{"-s3url", a.s3URL, "-bucket", a.bucket, "-prefix", a.prefix, "-credentials", a.credentials,
		"-password", a.password, "-namespace", p.Spec.Pod.Namespace, "-location", p.Spec.BackupStorageLocation,
		"backup", "-path", path, "-pod", p.Spec.Pod.Name, "-volume", p.Spec.Volume, "-pod-volume-tags=false"}
	if claim := p.Annotations[v1.PVCNameAnnotation]; claim != "" {
		args = append(args, "-claim", claim)
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(c, a.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+a.home)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("velerokopia %v: %w\n%s", args, err, stderr.Bytes())
	}
	var res struct {
		SnapshotID       string `json:"snapshotID"`
		Empty            bool   `json:"empty"`
		TotalBytes       int64  `json:"totalBytes"`
		IncrementalBytes int64  `json:"incrementalBytes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return fmt.Errorf("velerokopia printed %q: %w", stdout.Bytes(), err)
	}
	return updatePVB(ctx, key, func(p *v1.PodVolumeBackup) {
		// Velero's data path reports the whole size as done at the end.
		p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: res.TotalBytes, BytesDone: res.TotalBytes}
		// Where Velero's data mover pod mounts the volume
		// (exposer: /<PodVolumeBackup UID>), which its node agent
		// reports as the path.
		p.Status.Path = "/" + string(p.UID)
		p.Status.Phase = v1.PodVolumePhaseCompleted
		p.Status.SnapshotID = res.SnapshotID
		p.Status.CompletionTimestamp = &metav1.Time{Time: time.Now()}
		p.Status.IncrementalBytes = res.IncrementalBytes
		if res.Empty {
			p.Status.Message = "volume was empty so no snapshot was taken"
		}
		delete(p.Labels, exposing)
	})
}

// updatePVB writes a PodVolumeBackup as Velero's node agent does: the
// whole object (Velero's CRD has no status subresource), again on a
// conflict.
func updatePVB(ctx context.Context, key client.ObjectKey, mutate func(*v1.PodVolumeBackup)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p v1.PodVolumeBackup
		if err := admin.Get(ctx, key, &p); err != nil {
			return err
		}
		mutate(&p)
		return admin.Update(ctx, &p)
	})
}

// podLogTail is the end of a container's log of the first pod matching
// labels, or why there is none; for failure reports, so it never fails.
func podLogTail(ns string, labels map[string]string, container string, n int) string {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := admin.List(c, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("(no pod: %v)", err)
	}
	cs, err := kubernetes.NewForConfig(node.Config)
	if err != nil {
		return err.Error()
	}
	b, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: container}).DoRaw(c)
	if err != nil {
		return fmt.Sprintf("(reading the log of %s: %v)", pods.Items[0].Name, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freeLocalPort is a TCP port free on 127.0.0.1 now.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("copying %s: %w", from, err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		return fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	return nil
}
