package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// csiNamespaces is how many namespaces the claims are spread over.
const csiNamespaces = 5

// measureCSISize runs the CSI measurement for one N: a fresh cluster with
// the CSI stack and N bound claims holding data, one server process, and
// per run the floor's and Lifeboat's backups (order alternating), then
// both deletions (same order), each deleting what its own backup left.
func measureCSISize(ctx context.Context, c config, n int) (res csiSizeResult, err error) {
	res.N, res.Namespaces, res.VolumeBytes = n, csiNamespaces, c.csiVolumeBytes
	var stack *csistack.Stack
	e, err := setUpWith(ctx, c, n, fmt.Sprintf("csi-n%d", n), func(e *sizeEnv) error {
		logf("N=%d: starting the CSI stack", n)
		start := time.Now()
		var err error
		stack, err = csistack.Start(ctx, csistack.Options{Kubeconfig: e.kubeconfig, StateDir: filepath.Join(e.dir, "csi")})
		if err != nil {
			return err
		}
		e.cleanups = append(e.cleanups, stack.Stop)
		logf("N=%d: CSI stack up in %.1fs", n, time.Since(start).Seconds())
		e.namespaces = make([]string, csiNamespaces)
		for i := range e.namespaces {
			e.namespaces[i] = fmt.Sprintf("bench-csi-%d-%d", n, i)
		}
		for _, ns := range append([]string{serverNamespace}, e.namespaces...) {
			if err := createNamespace(ctx, e.k, ns); err != nil {
				return err
			}
		}
		start = time.Now()
		if err := boundClaims(ctx, e.k, stack, e.namespaces, n, c.csiVolumeBytes, c.workers); err != nil {
			return fmt.Errorf("%w\nkube-controller-manager: %s\ncsi-provisioner: %s", err,
				stack.Log("kube-controller-manager", 10), stack.Log("csi-provisioner", 10))
		}
		e.populateSeconds = time.Since(start).Seconds()
		res.BindSeconds = e.populateSeconds
		logf("N=%d: %d claims bound, %d bytes written into each volume, in %.1fs", n, n, c.csiVolumeBytes, e.populateSeconds)
		return nil
	})
	if err != nil {
		return res, err
	}
	defer e.close()

	m := &csiMeasure{c: c, e: e, stack: stack}
	for i := range c.warmup {
		logf("N=%d: CSI warm-up %d/%d", n, i+1, c.warmup)
		if _, err := m.run(ctx, i, fmt.Sprintf("warmup%d", i+1)); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	for i := range c.runs {
		r, err := m.run(ctx, i, fmt.Sprintf("run%d", i+1))
		if err != nil {
			return res, err
		}
		r.Run = i + 1
		res.Runs = append(res.Runs, r)
		logf("N=%d CSI run %d: backup floor %.2fs, lifeboat %.2fs (%.2fx); deletion floor %.2fs, lifeboat %.2fs (%.2fx)",
			n, i+1, r.FloorBackup.WallSeconds, r.LifeboatBackup.WallSeconds, r.BackupRatio(),
			r.FloorDelete.WallSeconds, r.LifeboatDelete.WallSeconds, r.DeleteRatio())
	}
	st, err := e.serverPeak()
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	return res, nil
}

// boundClaims creates n claims of the stack's class (1Mi) round-robin
// over namespaces, waits until all are bound, and writes volumeBytes into
// each volume's directory in the driver's state, so that every snapshot
// copies a file.
func boundClaims(ctx context.Context, k *kube, stack *csistack.Stack, namespaces []string, n, volumeBytes, workers int) error {
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				pvc := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("data-%04d", i),
						Labels: map[string]string{"app.kubernetes.io/name": "lifeboat-bench"}},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						StorageClassName: ptr.To(csistack.StorageClass),
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
					},
				}
				if err := createWithRetry(ctx, func(ctx context.Context) error {
					_, err := k.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
					return err
				}); err != nil {
					select {
					case errs <- fmt.Errorf("creating claim %s/%s: %w", pvc.Namespace, pvc.Name, err):
					default:
					}
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	deadline := time.Now().Add(5 * time.Minute)
	for {
		volumes, bound, err := claimVolumes(ctx, k, namespaces)
		if err != nil {
			return err
		}
		if bound == n {
			pvs, err := k.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("listing persistent volumes: %w", err)
			}
			data := volumeData(volumeBytes)
			written := 0
			for _, pv := range pvs.Items {
				if pv.Spec.CSI == nil || !volumes[pv.Name] {
					continue
				}
				if err := stack.WriteVolumeFiles(pv.Spec.CSI.VolumeHandle, map[string][]byte{"data.bin": data}); err != nil {
					return err
				}
				written++
			}
			if written != n {
				return fmt.Errorf("found %d CSI volumes of the %d bound claims", written, n)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d claims bound after 5 minutes", bound, n)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// claimVolumes lists the claims of namespaces and returns the volumes of
// the bound ones.
func claimVolumes(ctx context.Context, k *kube, namespaces []string) (map[string]bool, int, error) {
	volumes := map[string]bool{}
	bound := 0
	for _, ns := range namespaces {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		l, err := k.cs.CoreV1().PersistentVolumeClaims(ns).List(cctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("listing claims in %s: %w", ns, err)
		}
		for _, pvc := range l.Items {
			if pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "" {
				volumes[pvc.Spec.VolumeName] = true
				bound++
			}
		}
	}
	return volumes, bound, nil
}

// volumeData is what each volume holds: text, so that it looks like data
// and not like a hole.
func volumeData(size int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %d of the bench volume's data\n", i)
	}
	return []byte(b.String()[:size])
}

// csiMeasure runs the runs of one N.
type csiMeasure struct {
	c     config
	e     *sizeEnv
	stack *csistack.Stack
}

// run is one run: both backups, then both deletions, each pair in the
// order of run i (floor first when i is even), with the API server's
// request counters around each side and the checks after both.
func (m *csiMeasure) run(ctx context.Context, i int, label string) (csiRunResult, error) {
	r := csiRunResult{FloorFirst: i%2 == 0}
	handlesFile := filepath.Join(m.e.dir, "csifloor-"+label+".json")
	backupName := fmt.Sprintf("bench-csi-%d-%s", m.e.n, label)
	var floorSnaps, lifeboatSnaps []string

	fc, lc, err := alternate(ctx, m.e.k, m.c.pause, i, func() error {
		var err error
		r.FloorBackup, floorSnaps, err = m.floorBackup(ctx, label, handlesFile)
		return err
	}, func() error {
		var err error
		r.LifeboatBackup, lifeboatSnaps, err = m.lifeboatBackup(ctx, backupName)
		return err
	})
	if err != nil {
		return r, err
	}
	r.FloorBackup.APIRequests, r.LifeboatBackup.APIRequests = fc.Total, lc.Total
	if err := m.noSnapshotObjects(ctx, "after both backups"); err != nil {
		return r, err
	}
	if m.c.keep {
		// The deletion removes the backup's log from the store; with
		// -keep it stays in the work directory, to see where the time went.
		logName := backupName + "-logs.gz"
		if data, err := os.ReadFile(filepath.Join(m.e.storeRoot, bucket, "backups", backupName, logName)); err == nil {
			_ = os.WriteFile(filepath.Join(m.e.dir, logName), data, 0o644)
		}
	}

	fc, lc, err = alternate(ctx, m.e.k, m.c.pause, i, func() error {
		var err error
		r.FloorDelete, err = m.floorDelete(ctx, label, handlesFile, floorSnaps)
		return err
	}, func() error {
		var err error
		r.LifeboatDelete, err = m.lifeboatDelete(ctx, backupName, lifeboatSnaps)
		return err
	})
	if err != nil {
		return r, err
	}
	r.FloorDelete.APIRequests, r.LifeboatDelete.APIRequests = fc.Total, lc.Total
	if err := m.noSnapshotObjects(ctx, "after both deletions"); err != nil {
		return r, err
	}
	left, err := m.stack.Snapshots()
	if err != nil {
		return r, fmt.Errorf("listing the driver's snapshots: %w", err)
	}
	if len(left) > 0 {
		return r, fmt.Errorf("the driver still holds %d snapshots after both deletions", len(left))
	}
	return r, nil
}

// newSnapshots returns the driver's snapshots that are not in before.
func (m *csiMeasure) newSnapshots(before []string) ([]string, error) {
	after, err := m.stack.Snapshots()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range after {
		if !slices.Contains(before, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (m *csiMeasure) floorBackup(ctx context.Context, label, handlesFile string) (csiSideResult, []string, error) {
	before, err := m.stack.Snapshots()
	if err != nil {
		return csiSideResult{}, nil, err
	}
	ch, err := runChild(ctx, m.c.csiFloorBin, "CSI backup floor "+label, m.c.backupTimeout, "backup",
		"-kubeconfig", m.e.kubeconfig, "-namespaces", strings.Join(m.e.namespaces, ","), "-class", csistack.SnapshotClass,
		"-handles", handlesFile, "-run", "floor-"+label)
	if err != nil {
		return csiSideResult{}, nil, err
	}
	res := csiSideResult{WallSeconds: ch.wall.Seconds(), CPUSeconds: ch.cpu.Seconds()}
	if _, err := fmt.Sscanf(ch.stdout, "snapshots=%d ready_seconds=%g seconds=%g peak_rss_kib=%d",
		&res.Snapshots, &res.ReadySeconds, &res.SelfSeconds, &res.PeakRSSKiB); err != nil {
		return res, nil, fmt.Errorf("CSI backup floor %s: parsing its output %q: %w", label, ch.stdout, err)
	}
	made, err := m.newSnapshots(before)
	if err != nil {
		return res, nil, err
	}
	var written []struct {
		Handle string `json:"handle"`
	}
	data, err := os.ReadFile(handlesFile)
	if err == nil {
		err = json.Unmarshal(data, &written)
	}
	if err != nil {
		return res, nil, fmt.Errorf("reading the floor's handles: %w", err)
	}
	res.DriverSnapshots = len(made)
	if res.Snapshots != m.e.n || len(made) != m.e.n || len(written) != m.e.n {
		return res, nil, fmt.Errorf("CSI backup floor %s: %d snapshots reported, %d handles written, %d new in the driver; want %d each",
			label, res.Snapshots, len(written), len(made), m.e.n)
	}
	for _, w := range written {
		if !slices.Contains(made, w.Handle) {
			return res, nil, fmt.Errorf("CSI backup floor %s: handle %s is not a new snapshot of the driver", label, w.Handle)
		}
	}
	return res, made, nil
}

func (m *csiMeasure) lifeboatBackup(ctx context.Context, name string) (csiSideResult, []string, error) {
	before, err := m.stack.Snapshots()
	if err != nil {
		return csiSideResult{}, nil, err
	}
	srv := m.e.srv
	cpuBefore, err := readProcCPU(srv.pid())
	if err != nil {
		return csiSideResult{}, nil, err
	}
	bk := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name},
		Spec:       v1.BackupSpec{IncludedNamespaces: m.e.namespaces, StorageLocation: locationName},
	}
	t, err := createAndWait(ctx, m.e.k, srv, bk, &v1.BackupList{}, m.c.backupTimeout,
		func(b *v1.Backup) string { return string(b.Status.Phase) }, backupFinished)
	if err != nil {
		return csiSideResult{}, nil, err
	}
	res := csiSideResult{Name: name, WallSeconds: t.wall.Seconds(), PickupSeconds: t.pickup.Seconds()}
	if cpu, err := readProcCPU(srv.pid()); err == nil {
		res.CPUSeconds = (cpu - cpuBefore).Seconds()
	}
	if st, err := readProcStatus(srv.pid()); err == nil {
		res.PeakRSSKiB = st.hwmKiB
	}
	final := t.final
	res.Snapshots = final.Status.CSIVolumeSnapshotsCompleted
	if final.Status.Phase != v1.BackupPhaseCompleted || final.Status.CSIVolumeSnapshotsAttempted != m.e.n || res.Snapshots != m.e.n {
		return res, nil, fmt.Errorf("backup %s ended %s with %d of %d CSI snapshots completed (want %d; %d errors, %d warnings); server log %s",
			name, final.Status.Phase, res.Snapshots, final.Status.CSIVolumeSnapshotsAttempted, m.e.n, final.Status.Errors, final.Status.Warnings, srv.logPath)
	}
	made, err := m.newSnapshots(before)
	if err != nil {
		return res, nil, err
	}
	res.DriverSnapshots = len(made)
	if len(made) != m.e.n {
		return res, nil, fmt.Errorf("backup %s: the driver holds %d new snapshots, want %d", name, len(made), m.e.n)
	}
	return res, made, nil
}

func (m *csiMeasure) floorDelete(ctx context.Context, label, handlesFile string, snaps []string) (csiSideResult, error) {
	ch, err := runChild(ctx, m.c.csiFloorBin, "CSI deletion floor "+label, m.c.backupTimeout, "delete",
		"-kubeconfig", m.e.kubeconfig, "-handles", handlesFile, "-state-dir", m.stack.StateDir, "-run", "floor-"+label)
	if err != nil {
		return csiSideResult{}, err
	}
	res := csiSideResult{WallSeconds: ch.wall.Seconds(), CPUSeconds: ch.cpu.Seconds()}
	if _, err := fmt.Sscanf(ch.stdout, "snapshots=%d seconds=%g peak_rss_kib=%d", &res.Snapshots, &res.SelfSeconds, &res.PeakRSSKiB); err != nil {
		return res, fmt.Errorf("CSI deletion floor %s: parsing its output %q: %w", label, ch.stdout, err)
	}
	left, err := m.stillHeld(snaps)
	res.DriverSnapshots = left
	if err != nil {
		return res, fmt.Errorf("CSI deletion floor %s: listing the driver's snapshots: %w", label, err)
	}
	if left > 0 {
		return res, fmt.Errorf("CSI deletion floor %s: the driver still holds %d of its %d snapshots", label, left, len(snaps))
	}
	return res, nil
}

func (m *csiMeasure) lifeboatDelete(ctx context.Context, name string, snaps []string) (csiSideResult, error) {
	srv := m.e.srv
	cpuBefore, err := readProcCPU(srv.pid())
	if err != nil {
		return csiSideResult{}, err
	}
	req := &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name + "-delete", Labels: map[string]string{v1.BackupNameLabel: name}},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: name},
	}
	t, err := createAndWait(ctx, m.e.k, srv, req, &v1.DeleteBackupRequestList{}, m.c.backupTimeout,
		func(r *v1.DeleteBackupRequest) string { return string(r.Status.Phase) },
		func(p string) bool {
			return p == string(v1.DeleteBackupRequestPhaseProcessed) || p == string(v1.DeleteBackupRequestPhaseFailed)
		})
	if err != nil {
		return csiSideResult{}, err
	}
	res := csiSideResult{Name: name, WallSeconds: t.wall.Seconds(), PickupSeconds: t.pickup.Seconds(), Snapshots: len(snaps)}
	if cpu, err := readProcCPU(srv.pid()); err == nil {
		res.CPUSeconds = (cpu - cpuBefore).Seconds()
	}
	if st, err := readProcStatus(srv.pid()); err == nil {
		res.PeakRSSKiB = st.hwmKiB
	}
	if final := t.final; final.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(final.Status.Errors) > 0 {
		return res, fmt.Errorf("deletion of %s ended %s with errors %v; server log %s", name, final.Status.Phase, final.Status.Errors, srv.logPath)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = m.e.k.c.Get(cctx, client.ObjectKey{Namespace: serverNamespace, Name: name}, &v1.Backup{})
	cancel()
	if !apierrors.IsNotFound(err) {
		return res, fmt.Errorf("the Backup %s is still there after its deletion (get: %w)", name, err)
	}
	left, err := m.stillHeld(snaps)
	res.DriverSnapshots = left
	if err != nil {
		return res, fmt.Errorf("deletion of %s: listing the driver's snapshots: %w", name, err)
	}
	if left > 0 {
		return res, fmt.Errorf("deletion of %s: the driver still holds %d of its %d snapshots; server log %s", name, left, len(snaps), m.e.srv.logPath)
	}
	return res, nil
}

// stillHeld counts the snapshots of snaps the driver still holds.
func (m *csiMeasure) stillHeld(snaps []string) (int, error) {
	now, err := m.stack.Snapshots()
	if err != nil {
		return 0, err
	}
	left := 0
	for _, id := range snaps {
		if slices.Contains(now, id) {
			left++
		}
	}
	return left, nil
}

// noSnapshotObjects waits (up to a minute, outside the timed windows)
// until no VolumeSnapshot is left in the bench namespaces and no
// VolumeSnapshotContent in the cluster: both sides must leave none.
func (m *csiMeasure) noSnapshotObjects(ctx context.Context, when string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		vss, vscs := &snapshotv1.VolumeSnapshotList{}, &snapshotv1.VolumeSnapshotContentList{}
		err := m.e.k.c.List(cctx, vss)
		if err == nil {
			err = m.e.k.c.List(cctx, vscs)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("listing snapshot objects %s: %w", when, err)
		}
		if len(vss.Items)+len(vscs.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d VolumeSnapshots and %d VolumeSnapshotContents left in the cluster a minute %s", len(vss.Items), len(vscs.Items), when)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// csiSideResult is one side of one backup or deletion.
type csiSideResult struct {
	// Name is Lifeboat's Backup.
	Name string `json:"name,omitempty"`
	// WallSeconds: the floor from process start to exit; Lifeboat from
	// creating the Backup (DeleteBackupRequest) to the watch event that
	// shows it Completed (Processed).
	WallSeconds float64 `json:"wallSeconds"`
	// SelfSeconds is the floor's own time, without process start and
	// client setup; ReadySeconds the part until its last snapshot was
	// ready (backup).
	SelfSeconds  float64 `json:"selfSeconds,omitempty"`
	ReadySeconds float64 `json:"readySeconds,omitempty"`
	// PickupSeconds is Lifeboat's time to its first status write.
	PickupSeconds float64 `json:"pickupSeconds,omitempty"`
	// CPUSeconds: the floor process's, or the server's during the side.
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSKiB: the floor's VmHWM, or the server's so far.
	PeakRSSKiB int64 `json:"peakRSSKiB"`
	// Snapshots: taken (the floor's count, Lifeboat's
	// status.csiVolumeSnapshotsCompleted) or deleted.
	Snapshots int `json:"snapshots"`
	// DriverSnapshots: new in the driver after a backup; still in it
	// after a deletion (0).
	DriverSnapshots int `json:"driverSnapshots"`
	APIRequests     int `json:"apiRequests"`
}

// csiRunResult is one run: both backups and both deletions.
type csiRunResult struct {
	Run            int           `json:"run"`
	FloorFirst     bool          `json:"floorFirst"`
	FloorBackup    csiSideResult `json:"floorBackup"`
	LifeboatBackup csiSideResult `json:"lifeboatBackup"`
	FloorDelete    csiSideResult `json:"floorDelete"`
	LifeboatDelete csiSideResult `json:"lifeboatDelete"`
}

// BackupRatio is Lifeboat's backup time over the floor's in the same run:
// above 1, Lifeboat is slower.
func (r csiRunResult) BackupRatio() float64 {
	return timeRatio(r.LifeboatBackup.WallSeconds, r.FloorBackup.WallSeconds)
}

// DeleteRatio is Lifeboat's deletion time over the floor's.
func (r csiRunResult) DeleteRatio() float64 {
	return timeRatio(r.LifeboatDelete.WallSeconds, r.FloorDelete.WallSeconds)
}

func timeRatio(lifeboat, floor float64) float64 {
	if floor <= 0 {
		return 0
	}
	return lifeboat / floor
}

// csiSizeResult is everything measured at one N.
type csiSizeResult struct {
	N           int     `json:"n"`
	Namespaces  int     `json:"namespaces"`
	VolumeBytes int     `json:"volumeBytes"`
	BindSeconds float64 `json:"bindSeconds"`
	// ServerPeakRSSKiB is the VmHWM of the one server process, over all
	// backups and deletions at this N (warm-up included).
	ServerPeakRSSKiB int64          `json:"serverPeakRSSKiB"`
	Runs             []csiRunResult `json:"runs"`
}

// medians returns, over the runs, the median seconds of each side and the
// median of the per-run ratios.
func (s csiSizeResult) medians() (floorBackup, lifeboatBackup, backupRatio, floorDelete, lifeboatDelete, deleteRatio float64) {
	var fb, lb, br, fd, ld, dr []float64
	for _, r := range s.Runs {
		fb, lb, br = append(fb, r.FloorBackup.WallSeconds), append(lb, r.LifeboatBackup.WallSeconds), append(br, r.BackupRatio())
		fd, ld, dr = append(fd, r.FloorDelete.WallSeconds), append(ld, r.LifeboatDelete.WallSeconds), append(dr, r.DeleteRatio())
	}
	return median(fb), median(lb), median(br), median(fd), median(ld), median(dr)
}

func writeCSIReport(w io.Writer, c config, results []csiSizeResult) {
	fmt.Fprintf(w, "## CSI snapshots: backup and deletion of N claims vs. the floor (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | floor backup s | lifeboat backup s | ratio (lifeboat/floor) | floor deletion s | lifeboat deletion s | ratio (lifeboat/floor) | server peak RSS MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		fb, lb, br, fd, ld, dr := s.medians()
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", s.N, fb, lb, br, fd, ld, dr, kibToMiB(s.ServerPeakRSSKiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Ratios are of times (above 1: Lifeboat is slower), per run, then the median. Each N: a fresh cluster with the CSI stack (internal/testutil/csistack), N claims of 1Mi in %d namespaces, bound, each volume holding a file; one server process. Per run: the floor's backup (`csifloor backup`: N VolumeSnapshots at once, all readyToUse, contents set to Retain, snapshots and contents deleted and gone) and a Lifeboat backup of the namespaces (Completed, N CSI snapshots completed, N new snapshots in the driver), then each side's deletion of its own snapshots (`csifloor delete`: contents pre-bound to the handles, deletionPolicy Delete, deleted once taken up, gone; Lifeboat: a DeleteBackupRequest, Processed), the driver left with none; order alternating by run; %d warm-up run(s), not counted; %s idle before each side. The floor runs without a client-side rate limit, as the server does by default (`--client-qps -1`). Server peak RSS: VmHWM of the server process over all runs at that N.",
		csiNamespaces, c.warmup, c.pause)
	if len(c.serverArgs) > 0 {
		fmt.Fprintf(w, " The server ran with `%s`.", strings.Join(c.serverArgs, " "))
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "### Raw CSI runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | first | floor backup s | floor ready s | floor CPU s | floor API calls | lifeboat backup s | pickup s | server CPU s | lifeboat API calls | backup ratio | floor deletion s | floor CPU s | floor API calls | lifeboat deletion s | server CPU s | lifeboat API calls | deletion ratio | server VmHWM MiB |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			first := "lifeboat"
			if r.FloorFirst {
				first = "floor"
			}
			fb, lb, fd, ld := r.FloorBackup, r.LifeboatBackup, r.FloorDelete, r.LifeboatDelete
			fmt.Fprintf(w, "| %d | %d | %s | %.2f | %.2f | %.2f | %d | %.2f | %.2f | %.2f | %d | %.2f | %.2f | %.2f | %d | %.2f | %.2f | %d | %.2f | %.1f |\n",
				s.N, r.Run, first, fb.WallSeconds, fb.ReadySeconds, fb.CPUSeconds, fb.APIRequests, lb.WallSeconds, lb.PickupSeconds, lb.CPUSeconds, lb.APIRequests, r.BackupRatio(),
				fd.WallSeconds, fd.CPUSeconds, fd.APIRequests, ld.WallSeconds, ld.CPUSeconds, ld.APIRequests, r.DeleteRatio(), kibToMiB(max(lb.PeakRSSKiB, ld.PeakRSSKiB)))
		}
	}
	fmt.Fprintln(w)
	for _, s := range results {
		fmt.Fprintf(w, "- N=%d: %d claims bound and %d bytes written into each volume in %.1f s\n", s.N, s.N, s.VolumeBytes, s.BindSeconds)
	}
}
