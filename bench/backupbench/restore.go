package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// measureRestoreSize runs the restore measurement for one N: a fresh
// cluster with the bench objects, one Lifeboat backup of the bench
// namespaces (as the backup measurement makes them), then a fresh server
// that restores that backup R times into new namespaces, alternating with
// the create floor, which creates the same objects from the same archive.
func measureRestoreSize(ctx context.Context, c config, n int) (res restoreSizeResult, err error) {
	res.N = n
	e, err := setUp(ctx, c, n, fmt.Sprintf("restore-n%d", n))
	if err != nil {
		return res, err
	}
	defer e.close()
	res.PopulateSeconds = e.populateSeconds
	res.AvgItemBytes = e.bytesPerItem
	want := n + len(e.namespaces)

	source := fmt.Sprintf("bench-%d-source", n)
	logf("N=%d: backing up the bench namespaces once (%s)", n, source)
	bk, err := backupRunner{k: e.k, srv: e.srv, namespaces: e.namespaces, storeRoot: e.storeRoot, timeout: c.backupTimeout}.run(ctx, source)
	if err != nil {
		return res, err
	}
	if bk.Items != want {
		return res, fmt.Errorf("backup %s holds %d items, want the %d ConfigMaps and %d namespaces", source, bk.Items, n, len(e.namespaces))
	}
	res.BackupSeconds, res.ArchiveBytes = bk.WallSeconds, bk.ArchiveBytes

	// A fresh server process, so that its VmHWM is that of the restores
	// alone, not of the backup above.
	if err := e.restartServer(ctx, "server-restore.log"); err != nil {
		return res, err
	}
	floor := createFloorRunner{
		bin: c.createFloorBin, kubeconfig: e.kubeconfig, archive: backupArchive(e.storeRoot, source),
		backup: source, namespaces: e.namespaces, workers: c.restoreWorkers, timeout: c.restoreTimeout,
	}
	lb := restoreRunner{k: e.k, srv: e.srv, backup: source, namespaces: e.namespaces, timeout: c.restoreTimeout}
	for i := range c.restoreWarmup {
		logf("N=%d: restore warm-up %d/%d", n, i+1, c.restoreWarmup)
		if _, err := floor.run(ctx, fmt.Sprintf("-fw%d", i+1)); err != nil {
			return res, err
		}
		if _, err := lb.run(ctx, fmt.Sprintf("bench-%d-restore-warmup%d", n, i+1), fmt.Sprintf("-rw%d", i+1)); err != nil {
			return res, err
		}
	}
	for i := range c.runs {
		r := restoreRunResult{Run: i + 1}
		fc, lc, err := alternate(ctx, e.k, c.pause, i, func() (err error) {
			r.Floor, err = floor.run(ctx, fmt.Sprintf("-f%d", i+1))
			return err
		}, func() (err error) {
			r.Lifeboat, err = lb.run(ctx, fmt.Sprintf("bench-%d-restore%d", n, i+1), fmt.Sprintf("-r%d", i+1))
			return err
		})
		if err != nil {
			return res, err
		}
		r.Floor.restoreAPICalls = restoreCalls(fc)
		r.Lifeboat.restoreAPICalls = restoreCalls(lc)
		if r.Floor.Objects != want {
			return res, fmt.Errorf("the create floor created %d objects, want %d", r.Floor.Objects, want)
		}
		if r.Lifeboat.Items != want {
			return res, fmt.Errorf("restore %s restored %d items, want the %d ConfigMaps and %d namespaces", r.Lifeboat.Name, r.Lifeboat.Items, n, len(e.namespaces))
		}
		// Outside both timed windows: the objects are really there, and
		// in their new namespaces.
		for _, side := range []struct{ label, suffix string }{{r.Floor.Label, fmt.Sprintf("-f%d", i+1)}, {r.Lifeboat.Name, fmt.Sprintf("-r%d", i+1)}} {
			if err := verifyRestored(ctx, e.k, side.label, side.suffix, n, e.namespaces); err != nil {
				return res, err
			}
			if err := removeRestored(ctx, e.k, side.suffix, e.namespaces); err != nil {
				return res, err
			}
		}
		logf("N=%d restore run %d: create floor %.0f objects/s (%.3fs), lifeboat %.0f objects/s (%.3fs), ratio %.2f",
			n, i+1, r.Floor.ObjectsPerSec(), r.Floor.WallSeconds, r.Lifeboat.ObjectsPerSec(), r.Lifeboat.WallSeconds, r.Ratio())
		res.Runs = append(res.Runs, r)
	}
	st, err := e.serverPeak()
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	res.ServerRSSAfterKiB = st.rssKiB
	return res, nil
}

// restoreRunner restores the source backup through the API, as a user
// would (a Restore with spec.namespaceMapping), and times it from outside
// the server.
type restoreRunner struct {
	k          *kube
	srv        *serverProcess
	backup     string
	namespaces []string
	timeout    time.Duration
}

// run restores the backup with every bench namespace mapped to
// <namespace><suffix>.
func (r restoreRunner) run(ctx context.Context, name, suffix string) (restoreResult, error) {
	cpuBefore, err := readProcCPU(r.srv.pid())
	if err != nil {
		return restoreResult{}, err
	}
	mapping := make(map[string]string, len(r.namespaces))
	for _, ns := range r.namespaces {
		mapping[ns] = ns + suffix
	}
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name},
		Spec:       v1.RestoreSpec{BackupName: r.backup, NamespaceMapping: mapping},
	}
	lastLog := time.Now()
	t, err := createAndWait(ctx, r.k, r.srv, rs, &v1.RestoreList{}, r.timeout,
		func(rs *v1.Restore) string { return string(rs.Status.Phase) }, restoreFinished,
		func(rs *v1.Restore) {
			// A restore far slower than the floor should show that it moves.
			if p := rs.Status.Progress; p != nil && time.Since(lastLog) >= 20*time.Second {
				logf("  restore %s: %d of %d items", name, p.ItemsRestored, p.TotalItems)
				lastLog = time.Now()
			}
		})
	if err != nil {
		return restoreResult{}, err
	}
	final := t.final
	if final.Status.Phase != v1.RestorePhaseCompleted {
		return restoreResult{}, fmt.Errorf("restore %s ended %s (failure reason %q, %d errors, %d warnings, validation %q); server log %s",
			name, final.Status.Phase, final.Status.FailureReason, final.Status.Errors, final.Status.Warnings,
			strings.Join(final.Status.ValidationErrors, "; "), r.srv.logPath)
	}
	cpuAfter, err := readProcCPU(r.srv.pid())
	if err != nil {
		return restoreResult{}, err
	}
	st, err := readProcStatus(r.srv.pid())
	if err != nil {
		return restoreResult{}, err
	}
	res := restoreResult{
		Name:             name,
		WallSeconds:      t.wall.Seconds(),
		PickupSeconds:    t.pickup.Seconds(),
		ServerCPUSeconds: (cpuAfter - cpuBefore).Seconds(),
		PeakRSSKiBSoFar:  st.hwmKiB,
		Warnings:         final.Status.Warnings,
	}
	if p := final.Status.Progress; p != nil {
		res.Items, res.TotalItems = p.ItemsRestored, p.TotalItems
	}
	if s, c := final.Status.StartTimestamp, final.Status.CompletionTimestamp; s != nil && c != nil {
		res.ServerSeconds = c.Sub(s.Time).Seconds()
	}
	return res, nil
}

// restoreFinished tells the phases a restore never leaves.
func restoreFinished(p string) bool {
	switch v1.RestorePhase(p) {
	case v1.RestorePhaseCompleted, v1.RestorePhasePartiallyFailed, v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
		return true
	}
	return false
}

// createFloorRunner runs the create floor (bench/createfloor) as a child
// process over the source backup's archive.
type createFloorRunner struct {
	bin        string
	kubeconfig string
	archive    string
	backup     string
	namespaces []string
	workers    int
	timeout    time.Duration
	// dryRun sends every create with dryRun=All (createfloor --dry-run),
	// into target namespaces that exist.
	dryRun bool
}

// run creates the archive's objects with every bench namespace mapped to
// <namespace><suffix>, timed from process start to exit: the same span as
// a restore's create-to-Completed, reading of the archive included.
func (f createFloorRunner) run(ctx context.Context, suffix string) (createFloorResult, error) {
	return f.runAs(ctx, suffix, "createfloor"+suffix)
}

// runAs is run with the velero.io/restore-name label value given: dry runs
// all map to the same namespaces, and their runs are told apart by label.
func (f createFloorRunner) runAs(ctx context.Context, suffix, label string) (createFloorResult, error) {
	args := []string{"--kubeconfig", f.kubeconfig, "--archive", f.archive, "--namespaces", strings.Join(f.namespaces, ","),
		"--suffix", suffix, "--workers", strconv.Itoa(f.workers), "--backup-name", f.backup, "--restore-name", label}
	if f.dryRun {
		args = append(args, "--dry-run")
	}
	ch, err := runChild(ctx, f.bin, "create floor "+label, f.timeout, args...)
	if err != nil {
		return createFloorResult{}, err
	}
	res := createFloorResult{Label: label, WallSeconds: ch.wall.Seconds(), CPUSeconds: ch.cpu.Seconds()}
	if _, err := fmt.Sscanf(ch.stdout, "objects=%d namespaces=%d read_seconds=%g create_seconds=%g seconds=%g peak_rss_kib=%d",
		&res.Objects, &res.Namespaces, &res.ReadSeconds, &res.CreateSeconds, &res.SelfSeconds, &res.PeakRSSKiB); err != nil {
		return createFloorResult{}, fmt.Errorf("create floor %s: parsing its output %q: %w", label, ch.stdout, err)
	}
	return res, nil
}

// verifyRestored checks that a restore (or a create floor run) left the
// ConfigMaps and namespaces in the cluster, in the mapped namespaces, by
// the velero.io/restore-name label both put on what they create. The
// ConfigMaps are counted namespace by namespace: a LIST with a label
// selector across the whole cluster reads every ConfigMap in it (every
// earlier run's too, minutes at 300,000), and all N found in the mapped
// namespaces leaves none anywhere else, since each side creates N.
func verifyRestored(ctx context.Context, k *kube, restoreName, suffix string, configMaps int, sourceNamespaces []string) error {
	sel := v1.RestoreNameLabel + "=" + restoreName
	gotNS, err := countLabelled(ctx, func(ctx context.Context, opts metav1.ListOptions) (int, string, error) {
		l, err := k.cs.CoreV1().Namespaces().List(ctx, opts)
		if err != nil {
			return 0, "", err
		}
		for _, ns := range l.Items {
			if !strings.HasSuffix(ns.Name, suffix) {
				return 0, "", fmt.Errorf("namespace %s labelled %s does not end in %s", ns.Name, sel, suffix)
			}
		}
		return len(l.Items), l.Continue, nil
	}, sel)
	if err != nil {
		return err
	}
	gotCM := 0
	for _, source := range sourceNamespaces {
		n, err := countLabelled(ctx, func(ctx context.Context, opts metav1.ListOptions) (int, string, error) {
			l, err := k.cs.CoreV1().ConfigMaps(source+suffix).List(ctx, opts)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		}, sel)
		if err != nil {
			return err
		}
		gotCM += n
	}
	if gotNS != len(sourceNamespaces) || gotCM != configMaps {
		return fmt.Errorf("%s left %d namespaces and %d ConfigMaps in the mapped namespaces, want %d and %d", restoreName, gotNS, gotCM, len(sourceNamespaces), configMaps)
	}
	return nil
}

// removeRestored deletes the ConfigMaps a side created, outside the timed
// windows, so that every run of either side creates into a cluster of the
// same size: left in place, each run adds N objects, and at 100,000 the
// side that went first was measurably faster (the floor, first in runs 1
// and 3 of 3, ran at 739 objects/s in run 1 and about 605 after). The
// namespaces stay (the test API server runs no namespace controller to
// finish deleting them); they are 20 small objects a run.
func removeRestored(ctx context.Context, k *kube, suffix string, sourceNamespaces []string) error {
	for _, source := range sourceNamespaces {
		ns := source + suffix
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := k.cs.CoreV1().ConfigMaps(ns).DeleteCollection(cctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("deleting the ConfigMaps restored into %s: %w", ns, err)
		}
	}
	return nil
}

// countLabelled pages through a LIST with a label selector and counts.
func countLabelled(ctx context.Context, page func(context.Context, metav1.ListOptions) (int, string, error), selector string) (int, error) {
	total, cont := 0, ""
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		n, next, err := page(cctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
		cancel()
		if err != nil {
			return 0, fmt.Errorf("counting objects labelled %s: %w", selector, err)
		}
		total += n
		if next == "" {
			return total, nil
		}
		cont = next
	}
}
