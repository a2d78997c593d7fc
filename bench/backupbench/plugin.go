package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pluginAnnotation is what the plugin measurement's BackupItemAction
// (examples/plugins/annotate, built by bench/run.sh) sets on the stored
// copy of every ConfigMap. The orchestrator counts it in the archive to
// prove that the plugin ran on every item.
const pluginAnnotation = "example.lifeboat.io/backed-up-by"

// pluginMode is one side of the plugin measurement.
type pluginMode struct {
	plugin bool
	label  string
}

var (
	withoutPlugin = pluginMode{plugin: false, label: "without"}
	withPlugin    = pluginMode{plugin: true, label: "with"}
)

// measurePluginSize runs the plugin-overhead measurement for one N: on one
// populated cluster, R pairs of backups of the same namespaces, one by a
// server started without plugins and one by a server started with a plugin
// dir holding one BackupItemAction that applies to every ConfigMap, in
// alternating order. Every backup gets a server process of its own,
// warmed up by c.warmup unmeasured backups (the first of which starts the
// plugin process and runs its initializer), so that the two sides differ
// in the plugin alone.
func measurePluginSize(ctx context.Context, c config, n int) (res pluginSizeResult, err error) {
	res.N = n
	res.PluginBinary = c.pluginBin
	e, err := setUp(ctx, c, n, fmt.Sprintf("plugin-n%d", n))
	if err != nil {
		return res, err
	}
	defer e.close()
	res.PopulateSeconds = e.populateSeconds
	res.AvgItemBytes = e.bytesPerItem

	// Two plugin dirs: an empty one, and one holding a copy of the plugin
	// binary alone (the host scans the dir recursively and runs every
	// executable in it).
	emptyDir := filepath.Join(e.dir, "plugins-none")
	pluginDir := filepath.Join(e.dir, "plugins")
	for _, d := range []string{emptyDir, pluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return res, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	pluginPath := filepath.Join(pluginDir, filepath.Base(c.pluginBin))
	if err := copyExecutable(c.pluginBin, pluginPath); err != nil {
		return res, err
	}
	// The plugin inherits the server's environment; with KUBECONFIG it
	// reads its plugin ConfigMap once per process (one LIST, during the
	// warm-up), as it would in a cluster. Both sides get the same.
	e.serverEnv = []string{"KUBECONFIG=" + e.kubeconfig}

	lb := backupRunner{k: e.k, namespaces: e.namespaces, storeRoot: e.storeRoot, timeout: c.backupTimeout}
	for i := range c.runs {
		r := pluginRunResult{Run: i + 1, WithFirst: i%2 == 1}
		order := []pluginMode{withoutPlugin, withPlugin}
		if r.WithFirst {
			order = []pluginMode{withPlugin, withoutPlugin}
		}
		for _, m := range order {
			dir := emptyDir
			if m.plugin {
				dir = pluginDir
			}
			e.serverArgs = []string{"--plugin-dir", dir}
			mr, err := runPluginMode(ctx, c, e, lb, m, i, pluginPath)
			if err != nil {
				return res, err
			}
			if m.plugin {
				r.With = mr
			} else {
				r.Without = mr
			}
		}
		logf("N=%d plugin run %d: without %.3fs, with %.3fs, ratio %.2f (plugin CPU %.2fs, server CPU %.2fs vs %.2fs)",
			n, i+1, r.Without.Backup.WallSeconds, r.With.Backup.WallSeconds, r.Ratio(),
			r.With.PluginCPUSeconds, r.With.Backup.ServerCPUSeconds, r.Without.Backup.ServerCPUSeconds)
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

// runPluginMode starts a fresh server for one side of run i, warms it up,
// and measures one backup after the idle pause, with the API server's
// request counters read around it (outside the timed window). It then
// checks the stored ConfigMaps: all annotated with the plugin, none
// without.
func runPluginMode(ctx context.Context, c config, e *sizeEnv, lb backupRunner, m pluginMode, i int, pluginPath string) (pluginModeResult, error) {
	res := pluginModeResult{Plugin: m.plugin}
	if err := e.restartServer(ctx, fmt.Sprintf("server-plugin-run%d-%s.log", i+1, m.label)); err != nil {
		return res, err
	}
	lb.srv = e.srv
	for j := range c.warmup {
		w, err := lb.run(ctx, fmt.Sprintf("bench-%d-plugin%d-%s-warmup%d", e.n, i+1, m.label, j+1))
		if err != nil {
			return res, err
		}
		res.WarmupSeconds = append(res.WarmupSeconds, w.WallSeconds)
	}
	// The plugin process is the server's child running the copy in the
	// plugin dir; after a warm-up it is running (the host starts it on
	// the first call and keeps it).
	pluginPID := 0
	if m.plugin {
		pid, err := childRunning(e.srv.pid(), pluginPath)
		if err != nil {
			return res, err
		}
		if pid == 0 && c.warmup > 0 {
			return res, fmt.Errorf("no plugin process (%s) under the server after the warm-up; server log %s", pluginPath, e.srv.logPath)
		}
		pluginPID = pid
	}

	before, err := apiRequests(ctx, e.k)
	if err != nil {
		return res, err
	}
	if err := sleep(ctx, c.pause); err != nil {
		return res, err
	}
	var pluginCPUBefore time.Duration
	if pluginPID != 0 {
		if pluginCPUBefore, err = readProcCPU(pluginPID); err != nil {
			return res, err
		}
	}
	name := fmt.Sprintf("bench-%d-plugin%d-%s", e.n, i+1, m.label)
	res.Backup, err = lb.run(ctx, name)
	if err != nil {
		return res, err
	}
	if pluginPID == 0 && m.plugin {
		// No warm-up: the measured backup started the plugin.
		if pluginPID, err = childRunning(e.srv.pid(), pluginPath); err != nil {
			return res, err
		}
	}
	if pluginPID != 0 {
		cpu, err := readProcCPU(pluginPID)
		if err != nil {
			return res, fmt.Errorf("the plugin process is gone after backup %s (%w); server log %s", name, err, e.srv.logPath)
		}
		res.PluginCPUSeconds = (cpu - pluginCPUBefore).Seconds()
		st, err := readProcStatus(pluginPID)
		if err != nil {
			return res, err
		}
		res.PluginPeakRSSKiB = st.hwmKiB
	}
	after, err := apiRequests(ctx, e.k)
	if err != nil {
		return res, err
	}
	d := after.delta(before)
	res.Backup.APIRequests, res.Backup.APILists = d.Total, d.Verbs["LIST"]
	if res.Backup.Items < e.n {
		return res, fmt.Errorf("backup %s holds %d items, want at least the %d ConfigMaps", name, res.Backup.Items, e.n)
	}

	// Outside the timed window: the plugin ran on every ConfigMap of this
	// backup, or, without it, on none.
	res.ConfigMaps, res.Annotated, err = countAnnotated(backupArchive(e.storeRoot, name), pluginAnnotation)
	if err != nil {
		return res, err
	}
	want := 0
	if m.plugin {
		want = e.n
	}
	if res.ConfigMaps != e.n || res.Annotated != want {
		return res, fmt.Errorf("backup %s (%s plugin) stored %d ConfigMaps, %d of them annotated %s; want %d and %d (server log %s)",
			name, m.label, res.ConfigMaps, res.Annotated, pluginAnnotation, e.n, want, e.srv.logPath)
	}
	return res, nil
}

// countAnnotated reads a backup's tar.gz and counts the ConfigMaps in it
// (the unversioned copy, resources/configmaps/namespaces/<ns>/<name>.json)
// and those whose metadata.annotations hold key.
func countAnnotated(archive, key string) (configMaps, annotated int, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return 0, 0, fmt.Errorf("opening the backup archive: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s: %w", archive, err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return configMaps, annotated, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", archive, err)
		}
		p := strings.Split(hdr.Name, "/")
		if hdr.Typeflag != tar.TypeReg || len(p) != 5 || p[0] != "resources" || p[1] != "configmaps" || p[2] != "namespaces" {
			continue
		}
		var item struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.NewDecoder(tr).Decode(&item); err != nil {
			return 0, 0, fmt.Errorf("decoding %s in %s: %w", hdr.Name, archive, err)
		}
		configMaps++
		if _, ok := item.Metadata.Annotations[key]; ok {
			annotated++
		}
	}
}

// childRunning returns the pid of a child of parent whose executable is
// exe, or 0 if there is none.
func childRunning(parent int, exe string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing /proc: %w", err)
	}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// The parent pid is the second field after the command name's
		// closing parenthesis.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(data[i+1:])); len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		if got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && got == exe {
			return pid, nil
		}
	}
	return 0, nil
}

// copyExecutable copies the plugin binary into the plugin dir.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening the plugin binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("copying the plugin binary: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying the plugin binary to %s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copying the plugin binary to %s: %w", dst, err)
	}
	return nil
}

// pluginModeResult is one measured backup of the plugin measurement.
type pluginModeResult struct {
	Plugin bool `json:"plugin"`
	// Backup is the measured backup; its server figures are those of a
	// server process started for it (VmHWM: over its warm-ups and it).
	Backup lifeboatResult `json:"backup"`
	// WarmupSeconds are the unmeasured backups the fresh server ran
	// first; with the plugin, the first of them starts the plugin process.
	WarmupSeconds []float64 `json:"warmupSeconds"`
	// ConfigMaps and Annotated are counted in the stored archive.
	ConfigMaps int `json:"configMaps"`
	Annotated  int `json:"annotated"`
	// PluginCPUSeconds is the user+system time the plugin process used
	// during the measured backup; PluginPeakRSSKiB its VmHWM after it.
	PluginCPUSeconds float64 `json:"pluginCPUSeconds"`
	PluginPeakRSSKiB int64   `json:"pluginPeakRSSKiB"`
}

// pluginRunResult is one pair: a backup without the plugin and one with it.
type pluginRunResult struct {
	Run int `json:"run"`
	// WithFirst tells the order: false, the backup without the plugin ran
	// first.
	WithFirst bool             `json:"withFirst"`
	Without   pluginModeResult `json:"without"`
	With      pluginModeResult `json:"with"`
}

// Ratio is the wall time with the plugin over the wall time without it,
// in the same pair.
func (r pluginRunResult) Ratio() float64 {
	if r.Without.Backup.WallSeconds <= 0 {
		return 0
	}
	return r.With.Backup.WallSeconds / r.Without.Backup.WallSeconds
}

// pluginSizeResult is everything the plugin measurement found at one N.
type pluginSizeResult struct {
	N               int               `json:"n"`
	PluginBinary    string            `json:"pluginBinary"`
	PopulateSeconds float64           `json:"populateSeconds"`
	AvgItemBytes    float64           `json:"avgItemBytes"`
	Runs            []pluginRunResult `json:"runs"`
}

// medians of the wall times and of the per-pair ratios, and the highest
// server peak RSS with the plugin (one server process per backup).
func (s pluginSizeResult) medians() (without, with, ratio float64, withPeakKiB, withoutPeakKiB int64) {
	var wo, wi, r []float64
	for _, run := range s.Runs {
		wo = append(wo, run.Without.Backup.WallSeconds)
		wi = append(wi, run.With.Backup.WallSeconds)
		r = append(r, run.Ratio())
		withPeakKiB = max(withPeakKiB, run.With.Backup.PeakRSSKiBSoFar)
		withoutPeakKiB = max(withoutPeakKiB, run.Without.Backup.PeakRSSKiBSoFar)
	}
	return median(wo), median(wi), median(r), withPeakKiB, withoutPeakKiB
}

// writePluginReport prints the plugin-overhead table and every backup.
func writePluginReport(w io.Writer, c config, results []pluginSizeResult) {
	fmt.Fprintf(w, "## Plugin call overhead: backup with one external BackupItemAction on every ConfigMap vs. without (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | without plugin s | with plugin s | ratio (with/without) | server peak RSS (with) MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, s := range results {
		wo, wi, r, peak, _ := s.medians()
		fmt.Fprintf(w, "| %d | %.3f | %.3f | %.2f | %.1f |\n", s.N, wo, wi, r, kibToMiB(peak))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each backup is of the %d bench namespaces (N ConfigMaps and the namespaces) by a server process of its own: `--plugin-dir` an empty directory, or one holding the BackupItemAction `%s` alone, which annotates the stored copy of every ConfigMap (counted in each archive: all N with it, none without). Each server ran %d unmeasured warm-up backup(s) first (the first one starts the plugin process); %s idle before each measured backup; the two sides alternate in order. Seconds are medians of the wall time (create to Completed); the ratio is taken per pair, then the median. Server peak RSS is the highest VmHWM of the servers that ran with the plugin (the plugin process is not included; see the raw runs).",
		c.namespaces, filepath.Base(c.pluginBin), c.warmup, c.pause)
	if len(c.serverArgs) > 0 {
		fmt.Fprintf(w, " The server ran with `%s`.", strings.Join(c.serverArgs, " "))
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "### Raw plugin runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | plugin | items | annotated | wall s | pickup s | server s (status) | server CPU s | plugin CPU s | server VmHWM MiB | plugin VmHWM MiB | API calls (LIST) | warm-up s | ratio |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			sides := []pluginModeResult{r.Without, r.With}
			if r.WithFirst {
				sides = []pluginModeResult{r.With, r.Without}
			}
			for _, m := range sides {
				label, plugin, ratio := "without", "", ""
				if m.Plugin {
					label = "with"
					plugin = fmt.Sprintf("%.2f", m.PluginCPUSeconds)
					ratio = fmt.Sprintf("%.2f", r.Ratio())
				}
				pluginRSS := ""
				if m.PluginPeakRSSKiB > 0 {
					pluginRSS = fmt.Sprintf("%.1f", kibToMiB(m.PluginPeakRSSKiB))
				}
				warm := make([]string, len(m.WarmupSeconds))
				for i, s := range m.WarmupSeconds {
					warm[i] = fmt.Sprintf("%.3f", s)
				}
				b := m.Backup
				fmt.Fprintf(w, "| %d | %d | %s | %d | %d | %.3f | %.3f | %.0f | %.2f | %s | %.1f | %s | %d (%d) | %s | %s |\n",
					s.N, r.Run, label, b.Items, m.Annotated, b.WallSeconds, b.PickupSeconds, b.ServerSeconds, b.ServerCPUSeconds, plugin,
					kibToMiB(b.PeakRSSKiBSoFar), pluginRSS, b.APIRequests, b.APILists, strings.Join(warm, ", "), ratio)
			}
		}
	}
	fmt.Fprintln(w)
	for _, s := range results {
		_, _, _, _, woPeak := s.medians()
		fmt.Fprintf(w, "- N=%d: items of %.0f B JSON on average; cluster populated in %.1f s; server peak RSS without the plugin %.1f MiB\n",
			s.N, s.AvgItemBytes, s.PopulateSeconds, kibToMiB(woPeak))
	}
}
