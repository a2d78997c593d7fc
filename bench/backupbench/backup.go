package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// measureSize runs the backup measurement for one N: the floor and
// Lifeboat's backups, alternating, against one fresh cluster and server.
func measureSize(ctx context.Context, c config, n int) (res sizeResult, err error) {
	res.N = n
	e, err := setUp(ctx, c, n, fmt.Sprintf("n%d", n))
	if err != nil {
		return res, err
	}
	defer e.close()
	res.PopulateSeconds = e.populateSeconds

	floor := floorRunner{bin: c.floorBin, kubeconfig: e.kubeconfig, namespaces: e.namespaces, dir: e.dir}
	lb := backupRunner{k: e.k, srv: e.srv, namespaces: e.namespaces, storeRoot: e.storeRoot, timeout: c.backupTimeout}
	for i := range c.warmup {
		logf("N=%d: warm-up %d/%d", n, i+1, c.warmup)
		if _, err := floor.run(ctx, fmt.Sprintf("warmup%d", i)); err != nil {
			return res, err
		}
		if _, err := lb.run(ctx, fmt.Sprintf("bench-%d-warmup%d", n, i)); err != nil {
			return res, err
		}
	}
	for i := range c.runs {
		r := runResult{Run: i + 1}
		fc, lc, err := alternate(ctx, e.k, c.pause, i, func() (err error) {
			r.Floor, err = floor.run(ctx, fmt.Sprintf("run%d", i+1))
			return err
		}, func() (err error) {
			r.Lifeboat, err = lb.run(ctx, fmt.Sprintf("bench-%d-run%d", n, i+1))
			return err
		})
		if err != nil {
			return res, err
		}
		r.Floor.APIRequests, r.Floor.APILists = fc.Total, fc.Verbs["LIST"]
		r.Lifeboat.APIRequests, r.Lifeboat.APILists = lc.Total, lc.Verbs["LIST"]
		if r.Floor.Items != n {
			return res, fmt.Errorf("the floor archived %d ConfigMaps, want %d", r.Floor.Items, n)
		}
		if r.Lifeboat.Items < n {
			return res, fmt.Errorf("lifeboat backed up %d items, want at least the %d ConfigMaps", r.Lifeboat.Items, n)
		}
		r.Floor.AvgItemBytes = e.bytesPerItem
		logf("N=%d run %d: floor %.0f items/s (%.3fs), lifeboat %.0f items/s (%.3fs), ratio %.2f",
			n, i+1, r.Floor.ItemsPerSec(), r.Floor.WallSeconds, r.Lifeboat.ItemsPerSec(), r.Lifeboat.WallSeconds, r.Ratio())
		res.Runs = append(res.Runs, r)
	}
	// VmHWM is the peak since the process started: over every backup at
	// this N, warm-ups included.
	st, err := e.serverPeak()
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	res.ServerRSSAfterKiB = st.rssKiB
	return res, nil
}

// backupRunner runs Lifeboat backups of the bench namespaces through the
// API, as a user would, and times them from outside the server.
type backupRunner struct {
	k          *kube
	srv        *serverProcess
	namespaces []string
	storeRoot  string
	timeout    time.Duration
}

func (b backupRunner) run(ctx context.Context, name string) (lifeboatResult, error) {
	cpuBefore, err := readProcCPU(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	bk := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name},
		Spec: v1.BackupSpec{
			IncludedNamespaces: b.namespaces,
			StorageLocation:    locationName,
		},
	}
	t, err := createAndWait(ctx, b.k, b.srv, bk, &v1.BackupList{}, b.timeout,
		func(b *v1.Backup) string { return string(b.Status.Phase) }, backupFinished)
	if err != nil {
		return lifeboatResult{}, err
	}
	final := t.final
	if final.Status.Phase != v1.BackupPhaseCompleted {
		return lifeboatResult{}, fmt.Errorf("backup %s ended %s (failure reason %q, %d errors); server log %s",
			name, final.Status.Phase, final.Status.FailureReason, final.Status.Errors, b.srv.logPath)
	}
	cpuAfter, err := readProcCPU(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	st, err := readProcStatus(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	res := lifeboatResult{
		Name:             name,
		WallSeconds:      t.wall.Seconds(),
		PickupSeconds:    t.pickup.Seconds(),
		ServerCPUSeconds: (cpuAfter - cpuBefore).Seconds(),
		PeakRSSKiBSoFar:  st.hwmKiB,
	}
	if p := final.Status.Progress; p != nil {
		res.Items = p.ItemsBackedUp
	}
	if s, c := final.Status.StartTimestamp, final.Status.CompletionTimestamp; s != nil && c != nil {
		res.ServerSeconds = c.Sub(s.Time).Seconds()
	}
	if fi, err := os.Stat(backupArchive(b.storeRoot, name)); err == nil {
		res.ArchiveBytes = fi.Size()
	}
	return res, nil
}

// backupArchive is where the filesystem store keeps a backup's tarball.
func backupArchive(storeRoot, name string) string {
	return filepath.Join(storeRoot, bucket, "backups", name, name+".tar.gz")
}

// backupFinished tells the phases a backup never leaves.
func backupFinished(p string) bool {
	switch v1.BackupPhase(p) {
	case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed, v1.BackupPhaseFailed, v1.BackupPhaseFailedValidation:
		return true
	}
	return false
}
