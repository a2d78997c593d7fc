package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// The deletion measurement's DeleteItemActions: the external plugin
// (bench/deleteplugin, on every ConfigMap) and the built-in labelled
// resource cleanup, configured for ConfigMaps (it applies to the backup's
// namespace items and deletes the kinds configured that carry the backup's
// label: here none do, so each call is one LIST).
const (
	deletePluginName = "bench.lifeboat.io/noop-delete"
	builtInCleanup   = "lifeboat.io/labelled-resource-cleanup"
)

// measureDeleteSize runs the deletion measurement for one N: on one
// populated cluster, R times: a backup (not measured), a fresh server
// process (so its peak RSS is the deletion's), the floor (reading the
// backup's tarball: what any deletion that looks at every item must do at
// least), then the deletion through a DeleteBackupRequest, timed from its
// creation to phase Processed.
func measureDeleteSize(ctx context.Context, c config, n int) (res deleteSizeResult, err error) {
	res.N = n
	e, err := setUp(ctx, c, n, fmt.Sprintf("delete-n%d", n))
	if err != nil {
		return res, err
	}
	defer e.close()
	res.PopulateSeconds = e.populateSeconds

	pluginDir := filepath.Join(e.dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return res, fmt.Errorf("creating %s: %w", pluginDir, err)
	}
	pluginPath := filepath.Join(pluginDir, filepath.Base(c.deletePluginBin))
	if err := copyExecutable(c.deletePluginBin, pluginPath); err != nil {
		return res, err
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = e.k.c.Create(cctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "bench-cleanup", Labels: map[string]string{"lifeboat.io/cleanup-resources": "true"}},
		Data:       map[string]string{"resources": "configmaps"},
	})
	cancel()
	if err != nil {
		return res, fmt.Errorf("configuring the built-in cleanup: %w", err)
	}
	e.serverArgs = append(e.serverArgs, "--plugin-dir", pluginDir)

	lb := backupRunner{k: e.k, namespaces: e.namespaces, storeRoot: e.storeRoot, timeout: c.backupTimeout}
	for i := range c.runs {
		run, err := runDelete(ctx, c, e, lb, i, pluginPath)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, run)
		logf("N=%d delete run %d: floor %.2fs, deletion %.2fs (%.2fx), server peak %.1f MiB, plugin peak %.1f MiB",
			n, i+1, run.FloorSeconds, run.WallSeconds, run.Ratio(), kibToMiB(run.ServerPeakRSSKiB), kibToMiB(run.PluginPeakRSSKiB))
	}
	return res, nil
}

func runDelete(ctx context.Context, c config, e *sizeEnv, lb backupRunner, i int, pluginPath string) (deleteRunResult, error) {
	res := deleteRunResult{Run: i + 1}
	name := fmt.Sprintf("bench-%d-delete%d", e.n, i+1)
	// The backup runs on a server of its own; a fresh one deletes it.
	if err := e.restartServer(ctx, fmt.Sprintf("server-delete-run%d-backup.log", i+1)); err != nil {
		return res, err
	}
	lb.srv = e.srv
	b, err := lb.run(ctx, name)
	if err != nil {
		return res, err
	}
	res.Items = b.Items
	if err := e.restartServer(ctx, fmt.Sprintf("server-delete-run%d.log", i+1)); err != nil {
		return res, err
	}

	archive := backupArchive(e.storeRoot, name)
	start := time.Now()
	items, err := readArchiveItems(archive)
	if err != nil {
		return res, err
	}
	res.FloorSeconds = time.Since(start).Seconds()
	res.FloorItems = items
	if err := sleep(ctx, c.pause); err != nil {
		return res, err
	}

	cpuBefore, err := readProcCPU(e.srv.pid())
	if err != nil {
		return res, err
	}
	req := &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name + "-delete", Labels: map[string]string{v1.BackupNameLabel: name}},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: name},
	}
	t, err := createAndWait(ctx, e.k, e.srv, req, &v1.DeleteBackupRequestList{}, c.backupTimeout,
		func(r *v1.DeleteBackupRequest) string { return string(r.Status.Phase) },
		func(p string) bool {
			return p == string(v1.DeleteBackupRequestPhaseProcessed) || p == string(v1.DeleteBackupRequestPhaseFailed)
		})
	if err != nil {
		return res, err
	}
	res.WallSeconds = t.wall.Seconds()
	final := t.final
	if final.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(final.Status.Errors) > 0 {
		return res, fmt.Errorf("deletion of %s ended %s with errors %v; server log %s", name, final.Status.Phase, final.Status.Errors, e.srv.logPath)
	}
	if cpu, err := readProcCPU(e.srv.pid()); err == nil {
		res.ServerCPUSeconds = (cpu - cpuBefore).Seconds()
	}
	st, err := e.serverPeak()
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	if pid, err := childRunning(e.srv.pid(), pluginPath); err == nil && pid != 0 {
		if pst, err := readProcStatus(pid); err == nil {
			res.PluginPeakRSSKiB = pst.hwmKiB
		}
	}

	// Outside the timed window: every ConfigMap went to the plugin, each
	// namespace to the built-in, and nothing is left.
	if rep := final.Status.Report; rep != nil {
		for _, a := range rep.Actions {
			switch a.Name {
			case deletePluginName:
				res.PluginItems = a.Items
			case builtInCleanup:
				res.BuiltInItems = a.Items
			}
		}
	}
	if res.PluginItems != int64(e.n) || res.BuiltInItems != int64(len(e.namespaces)) {
		return res, fmt.Errorf("deletion of %s passed %d items to %s and %d to %s; want %d and %d (server log %s)",
			name, res.PluginItems, deletePluginName, res.BuiltInItems, builtInCleanup, e.n, len(e.namespaces), e.srv.logPath)
	}
	if _, err := os.Stat(filepath.Dir(archive)); !errors.Is(err, os.ErrNotExist) {
		left, _ := os.ReadDir(filepath.Dir(archive))
		return res, fmt.Errorf("deletion of %s left its directory in the store (%d entries, stat: %w)", name, len(left), err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = e.k.c.Get(cctx, client.ObjectKey{Namespace: serverNamespace, Name: name}, &v1.Backup{})
	cancel()
	if !apierrors.IsNotFound(err) {
		return res, fmt.Errorf("the Backup %s is still there after its deletion (get: %w)", name, err)
	}
	return res, nil
}

// readArchiveItems streams a tarball through gzip and tar and counts the
// item files in it, the way the deletion reads it, without decoding them.
func readArchiveItems(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		if strings.HasPrefix(h.Name, "resources/") && !strings.Contains(h.Name, "-preferredversion/") {
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return n, fmt.Errorf("%s: %w", path, err)
			}
			n++
		}
	}
}

// deleteRunResult is one deletion.
type deleteRunResult struct {
	Run   int `json:"run"`
	Items int `json:"items"`
	// FloorSeconds is reading the tarball (gunzip, untar, each item read
	// through) in the orchestrator; FloorItems the item files it counted.
	FloorSeconds float64 `json:"floorSeconds"`
	FloorItems   int     `json:"floorItems"`
	// WallSeconds is from creating the DeleteBackupRequest to the watch
	// event showing it Processed.
	WallSeconds      float64 `json:"wallSeconds"`
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	ServerPeakRSSKiB int64   `json:"serverPeakRSSKiB"`
	PluginPeakRSSKiB int64   `json:"pluginPeakRSSKiB"`
	// PluginItems and BuiltInItems are the server's report of the items
	// each action was called for.
	PluginItems  int64 `json:"pluginItems"`
	BuiltInItems int64 `json:"builtInItems"`
}

// Ratio is the deletion's wall time over the floor's.
func (r deleteRunResult) Ratio() float64 {
	if r.FloorSeconds <= 0 {
		return 0
	}
	return r.WallSeconds / r.FloorSeconds
}

type deleteSizeResult struct {
	N               int               `json:"n"`
	PopulateSeconds float64           `json:"populateSeconds"`
	Runs            []deleteRunResult `json:"runs"`
}

func writeDeleteReport(w io.Writer, c config, results []deleteSizeResult) {
	fmt.Fprintf(w, "## Backup deletion with two DeleteItemActions (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | items in backup | floor s (read tarball) | deletion s | ratio | items/s | server peak RSS MiB | plugin peak RSS MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		var floor, wall, ratio, ips []float64
		var peak, pluginPeak int64
		items := 0
		for _, r := range s.Runs {
			floor = append(floor, r.FloorSeconds)
			wall = append(wall, r.WallSeconds)
			ratio = append(ratio, r.Ratio())
			ips = append(ips, perSec(r.Items, r.WallSeconds))
			peak, pluginPeak = max(peak, r.ServerPeakRSSKiB), max(pluginPeak, r.PluginPeakRSSKiB)
			items = r.Items
		}
		fmt.Fprintf(w, "| %d | %d | %.2f | %.2f | %.1f | %.0f | %.1f | %.1f |\n",
			s.N, items, median(floor), median(wall), median(ratio), median(ips), kibToMiB(peak), kibToMiB(pluginPeak))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each deletion is of a backup of the %d bench namespaces (N ConfigMaps and the namespaces), by a server process started for it with `--plugin-dir` holding `%s` (external, AppliesTo configmaps: N calls) and the built-in `%s` configured for ConfigMaps (AppliesTo namespaces: one call per namespace); both counts are checked against the request's report. Deletion seconds run from creating the DeleteBackupRequest to it being Processed: reading the tarball from the store, both actions on their items, the keys removed, the Backup object gone (all checked). The floor reads the same tarball (gunzip, untar, every item read through, nothing decoded) in the orchestrator, just before. Server peak RSS is the VmHWM of the server process that ran the deletion, highest over the runs.\n\n",
		c.namespaces, filepath.Base(c.deletePluginBin), builtInCleanup)
	fmt.Fprintln(w, "### Raw deletion runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | items | floor s | deletion s | ratio | server CPU s | server VmHWM MiB | plugin VmHWM MiB | plugin items | built-in items |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			fmt.Fprintf(w, "| %d | %d | %d | %.2f | %.2f | %.1f | %.2f | %.1f | %.1f | %d | %d |\n", s.N, r.Run, r.Items, r.FloorSeconds, r.WallSeconds, r.Ratio(),
				r.ServerCPUSeconds, kibToMiB(r.ServerPeakRSSKiB), kibToMiB(r.PluginPeakRSSKiB), r.PluginItems, r.BuiltInItems)
		}
	}
	fmt.Fprintln(w)
}
