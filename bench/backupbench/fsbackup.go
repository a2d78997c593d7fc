package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/bench/internal/fstree"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

const (
	// fsNode is the node the volume's pod and the node agent are on.
	fsNode = "bench-node"
	// fsVolume is the pod's emptyDir volume that holds the tree.
	fsVolume    = "data"
	fsCredKey   = "cloud"
	fsCredName  = "bench-s3"
	fsTreeSeed  = 20261206
	fsAgentWait = 2 * time.Minute
)

// measureFS runs the file-system backup measurement: a real S3 server
// (versitygw, over TLS unless -fs-tls=false), a fresh local cluster, the
// server and `lifeboat node-agent` as processes on this machine, the
// kubelet's pod directory a directory of the work directory laid out as
// the kubelet lays it out. First a small volume (-fs-small-bytes): the
// warm-ups and one run, with a node agent of its own so that its peak RSS
// is that volume's; then the measured volume (-fs-bytes), warm-ups and
// runs, with a fresh node agent.
func measureFS(ctx context.Context, c config) (res fsResult, err error) {
	res.TLS = c.fsTLS
	m, err := setUpFS(ctx, c)
	if err != nil {
		return res, err
	}
	defer m.close()
	if c.fsSmallBytes > 0 {
		v, err := m.volume(ctx, "small", c.fsSmallBytes, c.warmup, 1)
		res.Small = &v
		if err != nil {
			return res, fmt.Errorf("volume of %s: %w", mib(c.fsSmallBytes), err)
		}
	}
	res.Main, err = m.volume(ctx, "main", c.fsBytes, c.warmup, c.runs)
	if err != nil {
		return res, fmt.Errorf("volume of %s: %w", mib(c.fsBytes), err)
	}
	return res, nil
}

// fsMeasure is the file-system measurement's world.
type fsMeasure struct {
	c        config
	e        *sizeEnv
	s3       *s3server.Server
	s3c      *s3.Client
	bucket   string
	caFile   string
	hostPods string
	agent    *serverProcess
	agentN   int
}

func setUpFS(ctx context.Context, c config) (m *fsMeasure, err error) {
	m = &fsMeasure{c: c, bucket: "bench"}
	m.e = &sizeEnv{n: 0, c: c, dir: filepath.Join(c.workDir, "fs")}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	e := m.e
	m.hostPods = filepath.Join(e.dir, "pods")
	if err := os.MkdirAll(m.hostPods, 0o755); err != nil {
		return m, err
	}
	var opts []s3server.Option
	if c.fsTLS {
		opts = append(opts, s3server.WithTLS())
	}
	logf("fs: starting the S3 server (versitygw, TLS %v)", c.fsTLS)
	if m.s3, err = s3server.Launch(opts...); err != nil {
		return m, err
	}
	m.s3c = s3.New(s3.Options{
		Region: s3server.Region, BaseEndpoint: aws.String(m.s3.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(m.s3.AccessKey, m.s3.SecretKey, ""),
		HTTPClient:  m.s3.HTTPClient(),
	})
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err = m.s3c.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(m.bucket)})
	cancel()
	if err != nil {
		return m, fmt.Errorf("creating bucket %s: %w", m.bucket, err)
	}
	if c.fsTLS {
		m.caFile = filepath.Join(e.dir, "s3-ca.pem")
		if err := os.WriteFile(m.caFile, m.s3.CACert, 0o600); err != nil {
			return m, err
		}
	}

	logf("fs: starting a local cluster")
	if e.cluster, err = localcluster.Start(localcluster.Options{InstallCRDs: true}); err != nil {
		return m, err
	}
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := e.cluster.WriteKubeconfig(e.kubeconfig); err != nil {
		return m, fmt.Errorf("writing kubeconfig: %w", err)
	}
	if e.k, err = newKube(e.cluster.Config); err != nil {
		return m, err
	}
	if err := createNamespace(ctx, e.k, serverNamespace); err != nil {
		return m, err
	}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	defer cancel()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: fsCredName},
		Data:       map[string][]byte{fsCredKey: m.s3.CredentialsFile()},
	}
	if err := e.k.c.Create(cctx, secret); err != nil {
		return m, fmt.Errorf("creating the credential secret: %w", err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: locationName},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "aws",
			Config:   m.s3.BSLConfig(),
			Credential: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: fsCredName}, Key: fsCredKey,
			},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: m.bucket, CACert: m.s3.CACert}},
		},
	}
	if err := e.k.c.Create(cctx, bsl); err != nil {
		return m, fmt.Errorf("creating BackupStorageLocation %s: %w", locationName, err)
	}
	// What Lifeboat's backup looks for on the pod's node before it hands
	// volumes over: a running node agent pod (the real one is a process
	// here, the DaemonSet's pod only an object).
	agentPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "node-agent-bench", Labels: map[string]string{"role": "node-agent", "name": "node-agent"}},
		Spec:       corev1.PodSpec{NodeName: fsNode, Containers: []corev1.Container{{Name: "node-agent", Image: "lifeboat"}}},
	}
	if err := createRunningPod(cctx, e.k, agentPod); err != nil {
		return m, err
	}
	if err := e.startServer("server.log"); err != nil {
		return m, err
	}
	if err := waitLocationAvailable(ctx, e.k, e.srv, 2*time.Minute); err != nil {
		return m, err
	}
	return m, nil
}

// createRunningPod creates pod and marks it Running, as the kubelet would
// (the local cluster has none).
func createRunningPod(ctx context.Context, k *kube, pod *corev1.Pod) error {
	if err := k.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := k.c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("marking pod %s/%s Running: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (m *fsMeasure) close() {
	if err := m.stopAgent(); err != nil {
		logf("fs: %v", err)
	}
	if m.e != nil {
		m.e.close()
	}
	if m.s3 != nil {
		m.s3.Close()
	}
}

// startAgent starts a fresh `lifeboat node-agent` for fsNode and waits
// until it is ready (its cache synced), so that no backup waits for it.
func (m *fsMeasure) startAgent(ctx context.Context, label string) error {
	if err := m.stopAgent(); err != nil {
		return err
	}
	m.agentN++
	port, err := freeLocalPort()
	if err != nil {
		return err
	}
	health := fmt.Sprintf("127.0.0.1:%d", port)
	tmp := filepath.Join(m.e.dir, fmt.Sprintf("agent-tmp-%d", m.agentN))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	args := []string{"node-agent", "--kubeconfig", m.e.kubeconfig, "-n", serverNamespace, "--node-name", fsNode,
		"--host-pods-dir", m.hostPods, "--metrics-address", "0", "--health-address", health, "--log-level", "info"}
	if m.c.fsProfileDir != "" {
		args = append(args, "--cpu-profile", filepath.Join(m.c.fsProfileDir, "node-agent-"+label+".pprof"))
	}
	args = append(args, m.c.nodeAgentArgs...)
	// TMPDIR holds the node agent's work directory: the repositories'
	// connection configs and caches, as the DaemonSet's scratch volume.
	agent, err := startLifeboat(m.c.lifeboatBin, args, filepath.Join(m.e.dir, fmt.Sprintf("node-agent-%s.log", label)), []string{"TMPDIR=" + tmp})
	if err != nil {
		return err
	}
	m.agent = agent
	deadline := time.Now().Add(fsAgentWait)
	hc := &http.Client{Timeout: time.Second}
	for {
		if err := agent.exited(); err != nil {
			return fmt.Errorf("node agent: %w", err)
		}
		resp, err := hc.Get("http://" + health + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node agent not ready within %s (log %s)", fsAgentWait, agent.logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (m *fsMeasure) stopAgent() error {
	if m.agent == nil {
		return nil
	}
	a := m.agent
	m.agent = nil
	if err := a.stop(); err != nil {
		return fmt.Errorf("stopping the node agent: %w (log %s)", err, a.logPath)
	}
	return nil
}

func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// volume measures one volume: the tree generated once, a fresh node
// agent, warm-up runs and runs, each in a namespace (so a repository) of
// its own, so that each full backup uploads everything.
func (m *fsMeasure) volume(ctx context.Context, label string, size int64, warmup, runs int) (v fsVolumeResult, err error) {
	v.Label, v.Bytes = label, size
	tree := filepath.Join(m.e.dir, "tree-"+label)
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return v, err
	}
	logf("fs %s: generating %s of files", label, mib(size))
	start := time.Now()
	if v.Tree, err = fstree.Generate(tree, size, fsTreeSeed); err != nil {
		return v, err
	}
	v.GenerateSeconds = time.Since(start).Seconds()
	logf("fs %s: %d files (%d small, %d medium, %d large) in %d directories, %s, in %.1fs",
		label, v.Tree.Files, v.Tree.SmallFiles, v.Tree.MediumFiles, v.Tree.LargeFiles, v.Tree.Dirs, mib(v.Tree.Bytes), v.GenerateSeconds)
	if err := m.startAgent(ctx, label); err != nil {
		return v, err
	}
	at := tree
	defer func() {
		// The tree is the largest thing on disk: gone with its volume.
		_ = os.RemoveAll(at)
	}()
	for i := range warmup + runs {
		run := fmt.Sprintf("run%d", i-warmup+1)
		if i < warmup {
			run = fmt.Sprintf("warmup%d", i+1)
		}
		var r fsRunResult
		r, at, err = m.run(ctx, label, run, i, at, v.Tree)
		if err != nil {
			return v, err
		}
		if i < warmup {
			logf("fs %s %s: floor %.2fs, lifeboat %.2fs, incremental %.2fs (not counted)", label, run, r.Floor.WallSeconds, r.Lifeboat.WallSeconds, r.Incremental.WallSeconds)
			continue
		}
		r.Run = i - warmup + 1
		v.Runs = append(v.Runs, r)
		logf("fs %s %s: floor %.2fs (%.0f MiB/s, %s stored), lifeboat %.2fs (%.0f MiB/s, %s stored), ratio %.2f; incremental %.2fs",
			label, run, r.Floor.WallSeconds, r.Floor.mibPerSec(), mib(r.Floor.StoredBytes), r.Lifeboat.WallSeconds, r.Lifeboat.mibPerSec(),
			mib(r.Lifeboat.StoredBytes), r.Ratio(), r.Incremental.WallSeconds)
	}
	st, err := readProcStatus(m.agent.pid())
	if err != nil {
		return v, err
	}
	v.AgentPeakRSSKiB = st.hwmKiB
	return v, m.stopAgent()
}

// run is one run on a volume: a namespace with a running pod whose
// emptyDir holds the tree (moved there from where it was), its repository
// made ready outside the timed windows, the floor's and Lifeboat's full
// backups in the order of run i, then an incremental Lifeboat backup of
// the unchanged volume. It returns where the tree is now.
func (m *fsMeasure) run(ctx context.Context, label, run string, i int, tree string, want fstree.Stats) (r fsRunResult, at string, err error) {
	at = tree
	ns := fmt.Sprintf("bench-fs-%s-%s", label, run)
	if err := createNamespace(ctx, m.e.k, ns); err != nil {
		return r, at, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: map[string]string{"backup.velero.io/backup-volumes": fsVolume}},
		Spec: corev1.PodSpec{
			NodeName:   fsNode,
			Containers: []corev1.Container{{Name: "app", Image: "app", VolumeMounts: []corev1.VolumeMount{{Name: fsVolume, MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: fsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = createRunningPod(cctx, m.e.k, pod)
	cancel()
	if err != nil {
		return r, at, err
	}
	// Where the kubelet keeps an emptyDir (internal/hostpods).
	volDir := filepath.Join(m.hostPods, string(pod.UID), "volumes", "kubernetes.io~empty-dir", fsVolume)
	if err := os.MkdirAll(filepath.Dir(volDir), 0o755); err != nil {
		return r, at, err
	}
	if err := os.Rename(tree, volDir); err != nil {
		return r, at, fmt.Errorf("moving the tree into the pod's volume: %w", err)
	}
	at = volDir

	start := time.Now()
	if err := m.repositoryReady(ctx, ns); err != nil {
		return r, at, err
	}
	r.RepositorySeconds = time.Since(start).Seconds()

	r.FloorFirst = i%2 == 0
	_, _, err = alternate(ctx, m.e.k, m.c.pause, i, func() error {
		var err error
		r.Floor, err = m.floor(ctx, label+"-"+run, volDir, want)
		return err
	}, func() error {
		var err error
		r.Lifeboat, err = m.lifeboat(ctx, ns+"-full", ns, want, false)
		return err
	})
	if err != nil {
		return r, at, err
	}
	if err := sleep(ctx, m.c.pause); err != nil {
		return r, at, err
	}
	if r.Incremental, err = m.lifeboat(ctx, ns+"-incremental", ns, want, true); err != nil {
		return r, at, err
	}
	// Each run's repository is a volume's worth of bytes in the S3
	// server's directory; no later run reads it.
	if err := os.RemoveAll(filepath.Join(m.s3.Dir, m.bucket, "kopia", ns)); err != nil {
		return r, at, fmt.Errorf("removing the run's repository: %w", err)
	}
	return r, at, nil
}

// repositoryReady creates the namespace's BackupRepository as a backup
// would and waits until the server has created the kopia repository, so
// that the timed backup measures the upload, not the repository's birth.
func (m *fsMeasure) repositoryReady(ctx context.Context, ns string) error {
	br := repository.NewBackupRepository(serverNamespace, ns, locationName)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := m.e.k.c.Create(cctx, br)
	cancel()
	if err != nil {
		return fmt.Errorf("creating BackupRepository %s: %w", br.Name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := m.e.k.c.Get(cctx, client.ObjectKeyFromObject(br), br)
		cancel()
		if err != nil {
			return fmt.Errorf("reading BackupRepository %s: %w", br.Name, err)
		}
		if br.Status.Phase == repository.PhaseReady {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("BackupRepository %s not Ready after 2 minutes (phase %q: %s; server log %s)", br.Name, br.Status.Phase, br.Status.Message, m.e.srv.logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// floor runs bench/fsfloor on the volume's directory into an object of
// the same bucket, checks that it read the whole tree and stored what it
// says, and removes the object.
func (m *fsMeasure) floor(ctx context.Context, label, dir string, want fstree.Stats) (fsSideResult, error) {
	key := "fsfloor/" + label + ".tar.zst"
	s3Before, err := readProcCPU(m.s3.PID())
	if err != nil {
		return fsSideResult{}, err
	}
	args := []string{"-dir", dir, "-endpoint", m.s3.Endpoint, "-region", s3server.Region, "-bucket", m.bucket, "-key", key}
	if m.caFile != "" {
		args = append(args, "-ca-file", m.caFile)
	}
	ch, err := runChildEnv(ctx, []string{"AWS_ACCESS_KEY_ID=" + m.s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.s3.SecretKey},
		m.c.fsFloorBin, "fs floor "+label, m.c.backupTimeout, args...)
	if err != nil {
		return fsSideResult{}, err
	}
	res := fsSideResult{Name: key, WallSeconds: ch.wall.Seconds(), CPUSeconds: ch.cpu.Seconds()}
	if s3After, err := readProcCPU(m.s3.PID()); err == nil {
		res.S3CPUSeconds = (s3After - s3Before).Seconds()
	}
	if _, err := fmt.Sscanf(ch.stdout, "files=%d bytes=%d stored_bytes=%d seconds=%g peak_rss_kib=%d",
		&res.Files, &res.Bytes, &res.StoredBytes, &res.SelfSeconds, &res.PeakRSSKiB); err != nil {
		return res, fmt.Errorf("fs floor %s: parsing its output %q: %w", label, ch.stdout, err)
	}
	if res.Files != want.Files || res.Bytes != want.Bytes {
		return res, fmt.Errorf("fs floor %s read %d files, %d bytes; the volume holds %d, %d", label, res.Files, res.Bytes, want.Files, want.Bytes)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	head, err := m.s3c.HeadObject(cctx, &s3.HeadObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(key)})
	if err != nil {
		return res, fmt.Errorf("fs floor %s: reading its object: %w", label, err)
	}
	if got := aws.ToInt64(head.ContentLength); got != res.StoredBytes {
		return res, fmt.Errorf("fs floor %s: its object holds %d bytes, it reported %d", label, got, res.StoredBytes)
	}
	if _, err := m.s3c.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(key)}); err != nil {
		return res, fmt.Errorf("fs floor %s: removing its object: %w", label, err)
	}
	return res, nil
}

// lifeboat backs up namespace ns (its pod's annotated volume) and checks
// that the volume was copied: the Backup Completed, its one
// PodVolumeBackup Completed with a snapshot and the volume's bytes, and
// the repository grown by at least the random part of the tree for a full
// backup, by almost nothing for an incremental one.
func (m *fsMeasure) lifeboat(ctx context.Context, name, ns string, want fstree.Stats, incremental bool) (fsSideResult, error) {
	srv, agent := m.e.srv, m.agent
	repoDir := filepath.Join(m.s3.Dir, m.bucket, "kopia", ns)
	storedBefore, err := dirBytes(repoDir)
	if err != nil {
		return fsSideResult{}, err
	}
	cpu := func() (s, a, g time.Duration, err error) {
		if s, err = readProcCPU(srv.pid()); err != nil {
			return
		}
		if a, err = readProcCPU(agent.pid()); err != nil {
			return
		}
		g, err = readProcCPU(m.s3.PID())
		return
	}
	s0, a0, g0, err := cpu()
	if err != nil {
		return fsSideResult{}, err
	}
	bk := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name},
		Spec:       v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: locationName},
	}
	if m.c.fsParallelFiles > 0 {
		bk.Spec.UploaderConfig = &v1.UploaderConfigForBackup{ParallelFilesUpload: m.c.fsParallelFiles}
	}
	t, err := createAndWait(ctx, m.e.k, srv, bk, &v1.BackupList{}, m.c.backupTimeout,
		func(b *v1.Backup) string { return string(b.Status.Phase) }, backupFinished)
	if err != nil {
		return fsSideResult{}, err
	}
	res := fsSideResult{Name: name, WallSeconds: t.wall.Seconds(), PickupSeconds: t.pickup.Seconds()}
	if s1, a1, g1, err := cpu(); err == nil {
		res.ServerCPUSeconds, res.CPUSeconds, res.S3CPUSeconds = (s1 - s0).Seconds(), (a1 - a0).Seconds(), (g1 - g0).Seconds()
	}
	if st, err := readProcStatus(agent.pid()); err == nil {
		res.PeakRSSKiB = st.hwmKiB
	}
	final := t.final
	if final.Status.Phase != v1.BackupPhaseCompleted {
		return res, fmt.Errorf("backup %s ended %s (%d errors, %d warnings); server log %s, node agent log %s",
			name, final.Status.Phase, final.Status.Errors, final.Status.Warnings, srv.logPath, agent.logPath)
	}
	var pvbs v1.PodVolumeBackupList
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = m.e.k.c.List(cctx, &pvbs, client.InNamespace(serverNamespace), client.MatchingLabels{v1.BackupNameLabel: name})
	cancel()
	if err != nil {
		return res, fmt.Errorf("listing the PodVolumeBackups of %s: %w", name, err)
	}
	if len(pvbs.Items) != 1 {
		return res, fmt.Errorf("backup %s has %d PodVolumeBackups, want 1", name, len(pvbs.Items))
	}
	pvb := pvbs.Items[0]
	res.Bytes, res.Files = pvb.Status.Progress.TotalBytes, want.Files
	if pvb.Status.Phase != v1.PodVolumePhaseCompleted || pvb.Status.SnapshotID == "" ||
		pvb.Status.Progress.TotalBytes != want.Bytes || pvb.Status.Progress.BytesDone != want.Bytes {
		return res, fmt.Errorf("PodVolumeBackup %s: phase %s, snapshot %q, %d of %d bytes; want Completed with a snapshot of the volume's %d bytes (%s)",
			pvb.Name, pvb.Status.Phase, pvb.Status.SnapshotID, pvb.Status.Progress.BytesDone, pvb.Status.Progress.TotalBytes, want.Bytes, pvb.Status.Message)
	}
	if s, c := pvb.Status.StartTimestamp, pvb.Status.CompletionTimestamp; s != nil && c != nil {
		res.PVBSeconds = c.Sub(s.Time).Seconds()
	}
	storedAfter, err := dirBytes(repoDir)
	if err != nil {
		return res, err
	}
	res.StoredBytes = storedAfter - storedBefore
	// At least the tree's random bytes (a third of it) for a full backup,
	// whatever the compression; an incremental one stores manifests,
	// indexes and the directories' objects only.
	if !incremental && res.StoredBytes < want.Bytes/3 {
		return res, fmt.Errorf("backup %s: the repository grew by %d bytes for a volume of %d: the data was not stored", name, res.StoredBytes, want.Bytes)
	}
	if incremental && res.StoredBytes > want.Bytes/50 {
		return res, fmt.Errorf("incremental backup %s of an unchanged volume stored %d bytes (of %d): it read the files again", name, res.StoredBytes, want.Bytes)
	}
	return res, nil
}

// dirBytes sums the sizes of the files under dir (0 if there is none):
// what the S3 server keeps of a repository.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return n, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// fsSideResult is one side of one run: the floor, a full Lifeboat backup
// or an incremental one.
type fsSideResult struct {
	// Name is the floor's object key or Lifeboat's Backup.
	Name string `json:"name"`
	// WallSeconds: the floor from process start to exit; Lifeboat from
	// creating the Backup to the watch event showing it Completed.
	WallSeconds float64 `json:"wallSeconds"`
	// SelfSeconds is the floor's own time, without process start.
	SelfSeconds float64 `json:"selfSeconds,omitempty"`
	// PickupSeconds is Lifeboat's time to its first status write;
	// PVBSeconds the PodVolumeBackup's start to completion (1 s steps).
	PickupSeconds float64 `json:"pickupSeconds,omitempty"`
	PVBSeconds    float64 `json:"pvbSeconds,omitempty"`
	// CPUSeconds: the floor process's, or the node agent's during the
	// backup; ServerCPUSeconds the server's; S3CPUSeconds versitygw's.
	CPUSeconds       float64 `json:"cpuSeconds"`
	ServerCPUSeconds float64 `json:"serverCPUSeconds,omitempty"`
	S3CPUSeconds     float64 `json:"s3CPUSeconds"`
	Files            int     `json:"files"`
	// Bytes: read by the floor; the PodVolumeBackup's totalBytes.
	Bytes int64 `json:"bytes"`
	// StoredBytes: the floor's object; what the repository grew by.
	StoredBytes int64 `json:"storedBytes"`
	// PeakRSSKiB: the floor's VmHWM; the node agent's so far.
	PeakRSSKiB int64 `json:"peakRSSKiB"`
}

func (s fsSideResult) mibPerSec() float64 {
	if s.WallSeconds <= 0 {
		return 0
	}
	return float64(s.Bytes) / (1 << 20) / s.WallSeconds
}

// fsRunResult is one run: both full backups and the incremental one.
type fsRunResult struct {
	Run               int          `json:"run"`
	FloorFirst        bool         `json:"floorFirst"`
	RepositorySeconds float64      `json:"repositorySeconds"`
	Floor             fsSideResult `json:"floor"`
	Lifeboat          fsSideResult `json:"lifeboat"`
	Incremental       fsSideResult `json:"incremental"`
}

// Ratio is Lifeboat's full backup time over the floor's in the same run:
// above 1, Lifeboat is slower.
func (r fsRunResult) Ratio() float64 { return timeRatio(r.Lifeboat.WallSeconds, r.Floor.WallSeconds) }

// fsVolumeResult is everything measured on one volume.
type fsVolumeResult struct {
	Label           string       `json:"label"`
	Bytes           int64        `json:"bytes"`
	Tree            fstree.Stats `json:"tree"`
	GenerateSeconds float64      `json:"generateSeconds"`
	// AgentPeakRSSKiB is the VmHWM of the node agent process that did
	// this volume's backups (warm-ups included), and nothing else.
	AgentPeakRSSKiB int64         `json:"agentPeakRSSKiB"`
	Runs            []fsRunResult `json:"runs"`
}

type fsResult struct {
	TLS   bool            `json:"tls"`
	Small *fsVolumeResult `json:"small,omitempty"`
	Main  fsVolumeResult  `json:"main"`
}

func (v fsVolumeResult) medians() (floor, lifeboat, ratio, incremental, floorStored, lifeboatStored float64) {
	var f, l, r, inc, fs, ls []float64
	for _, run := range v.Runs {
		f, l, r = append(f, run.Floor.WallSeconds), append(l, run.Lifeboat.WallSeconds), append(r, run.Ratio())
		inc = append(inc, run.Incremental.WallSeconds)
		fs, ls = append(fs, float64(run.Floor.StoredBytes)), append(ls, float64(run.Lifeboat.StoredBytes))
	}
	return median(f), median(l), median(r), median(inc), median(fs), median(ls)
}

func writeFSReport(w io.Writer, c config, res fsResult) {
	transport := "HTTPS"
	if !res.TLS {
		transport = "plain HTTP"
	}
	fmt.Fprintf(w, "## File-system backup: a volume of mixed files vs. the floor (%d runs, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| volume MiB | files | runs | floor s | lifeboat s | ratio (lifeboat/floor) | floor MiB/s | lifeboat MiB/s | incremental s | floor stored MiB | lifeboat stored MiB | node agent VmHWM after run 1 MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	vols := []fsVolumeResult{}
	if res.Small != nil {
		vols = append(vols, *res.Small)
	}
	vols = append(vols, res.Main)
	for _, v := range vols {
		if len(v.Runs) == 0 {
			continue
		}
		f, l, r, inc, fst, lst := v.medians()
		mb := float64(v.Tree.Bytes) / (1 << 20)
		fmt.Fprintf(w, "| %.0f | %d | %d | %.2f | %.2f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.1f |\n",
			mb, v.Tree.Files, len(v.Runs), f, l, r, mb/f, mb/l, inc, fst/(1<<20), lst/(1<<20), kibToMiB(v.Runs[0].Incremental.PeakRSSKiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Ratios are of times (above 1: Lifeboat is slower), per run, then the median. The volume is `bench/internal/fstree` (seed %d): 30 %% small files (256 B-64 KiB), 10 %% medium (256 KiB-4 MiB), 60 %% a few large (up to 128 MiB), text, random and 8 KiB pages of both. Store: versitygw over %s, one bucket. Floor: `bench/fsfloor` (tar | zstd default level | multipart upload, 16 MiB parts, 2 in flight) from process start to exit. Lifeboat: a Backup of the pod's namespace (volume annotated for fs-backup), from the create call to Completed, its PodVolumeBackup Completed with the volume's bytes; the server and `lifeboat node-agent` run as processes, the node agent reading the kubelet's pod directory laid out as the kubelet does. Each run in a namespace, so a repository, of its own (created before the timed window); incremental: a second backup of the same volume, unchanged, right after. Node agent VmHWM: of a node agent process that backed up only that volume, read after the warm-up(s) and the first run's incremental backup, so that both volumes count the same backups (each run's repository stays open in the node agent); %d warm-up run(s) of each volume, not counted; %s idle before each side.",
		fsTreeSeed, transport, c.warmup, c.pause)
	if len(c.serverArgs) > 0 {
		fmt.Fprintf(w, " The server ran with `%s`.", strings.Join(c.serverArgs, " "))
	}
	if len(c.nodeAgentArgs) > 0 {
		fmt.Fprintf(w, " The node agent ran with `%s`.", strings.Join(c.nodeAgentArgs, " "))
	}
	if c.fsParallelFiles > 0 {
		fmt.Fprintf(w, " The Backups set uploaderConfig.parallelFilesUpload %d.", c.fsParallelFiles)
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "### Raw file-system runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| volume MiB | run | first | floor s | floor CPU s | S3 CPU s | floor stored MiB | lifeboat s | pickup s | PVB s | node agent CPU s | server CPU s | S3 CPU s | lifeboat stored MiB | ratio | incremental s | node agent CPU s | S3 CPU s | stored KiB | repository ready s | node agent VmHWM MiB |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, v := range vols {
		for _, r := range v.Runs {
			first := "lifeboat"
			if r.FloorFirst {
				first = "floor"
			}
			f, l, inc := r.Floor, r.Lifeboat, r.Incremental
			fmt.Fprintf(w, "| %.0f | %d | %s | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f | %.1f |\n",
				float64(v.Tree.Bytes)/(1<<20), r.Run, first, f.WallSeconds, f.CPUSeconds, f.S3CPUSeconds, float64(f.StoredBytes)/(1<<20),
				l.WallSeconds, l.PickupSeconds, l.PVBSeconds, l.CPUSeconds, l.ServerCPUSeconds, l.S3CPUSeconds, float64(l.StoredBytes)/(1<<20), r.Ratio(),
				inc.WallSeconds, inc.CPUSeconds, inc.S3CPUSeconds, float64(inc.StoredBytes)/1024, r.RepositorySeconds, kibToMiB(max(l.PeakRSSKiB, inc.PeakRSSKiB)))
		}
	}
	fmt.Fprintln(w)
	for _, v := range vols {
		fmt.Fprintf(w, "- %s volume: %d files (%d small, %d medium, %d large) in %d directories, %.1f MiB, generated in %.1f s; floor peak RSS %s; node agent VmHWM after all %d run(s) %.1f MiB\n",
			v.Label, v.Tree.Files, v.Tree.SmallFiles, v.Tree.MediumFiles, v.Tree.LargeFiles, v.Tree.Dirs, float64(v.Tree.Bytes)/(1<<20), v.GenerateSeconds,
			floorRSS(v.Runs), len(v.Runs), kibToMiB(v.AgentPeakRSSKiB))
	}
}

func floorRSS(runs []fsRunResult) string {
	var rss []int64
	for _, r := range runs {
		rss = append(rss, r.Floor.PeakRSSKiB)
	}
	if len(rss) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", kibToMiB(slices.Max(rss)))
}
