// Command backupbench measures how fast Lifeboat backs up and restores a
// cluster, each against a floor measured on the same machine, against the
// same API server, in the same run.
//
// Backup (-n): for each N it starts a fresh local kube-apiserver, creates N
// ConfigMaps across 20 namespaces, starts a fresh `lifeboat server` process,
// and alternates runs of the floor (a plain program that LISTs the same
// objects and writes them into a tar.gz) with Lifeboat backups.
//
// Restore (-restore-n): for each N, a fresh cluster with the same objects is
// backed up once by Lifeboat; then a fresh server process restores that
// backup into new namespaces (spec.namespaceMapping), alternating with the
// create floor (a plain program that creates the same objects, read from the
// same archive, through the API with the same concurrency).
//
// Verification (-verify-n): for each N, a fresh cluster with the same
// objects is backed up once by Lifeboat; then a fresh server process
// verifies that backup with a restore dry run into existing namespaces
// (`backup verify --restore-dry-run --namespace-mappings`), alternating
// with the create floor in dry-run mode (the same archive read, the same
// creates sent with dryRun=All).
//
// Plugin overhead (-plugin-n): for each N, one populated cluster, and
// pairs of backups of the same namespaces by a server started without
// plugins and by one started with a plugin dir holding one external
// BackupItemAction (-plugin) that applies to every ConfigMap.
//
// Deletion (-delete-n): for each N, backups deleted through a
// DeleteBackupRequest with two DeleteItemActions, against reading the
// backup's tarball.
//
// CSI (-csi-n): for each N, a cluster with the CSI stack and N bound
// claims; per run a Lifeboat backup that snapshots every claim and the
// floor (bench/csifloor) taking the same snapshots, then each side's
// deletion of its snapshots.
//
// File-system backup (-fs-bytes): a volume of mixed files in a pod's
// emptyDir, backed up with fs-backup by the server and `lifeboat
// node-agent` into versitygw, against bench/fsfloor writing the same files
// compressed into the same store; then an incremental backup of the
// unchanged volume, and the node agent's peak RSS at a second, smaller
// size (-fs-small-bytes).
//
// It prints markdown tables of medians and the raw per-run numbers;
// bench/run.sh is its usual entry point and bench/README.md explains the
// figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type config struct {
	sizes          []int
	restoreSizes   []int
	verifySizes    []int
	pluginSizes    []int
	deleteSizes    []int
	csiSizes       []int
	runs           int
	warmup         int
	restoreWarmup  int
	namespaces     int
	itemBytes      int
	workers        int
	restoreWorkers int
	lifeboatBin    string
	floorBin       string
	createFloorBin string
	pluginBin      string
	// deletePluginBin is the deletion measurement's external
	// DeleteItemAction (go build ./bench/deleteplugin).
	deletePluginBin string
	// csiFloorBin is the CSI measurement's floor (go build
	// ./bench/csifloor); csiVolumeBytes what each claim's volume holds.
	csiFloorBin    string
	csiVolumeBytes int
	// fsBytes is the file-system measurement's volume (0: none),
	// fsSmallBytes the second size whose node agent RSS is compared;
	// fsFloorBin is go build ./bench/fsfloor.
	fsBytes, fsSmallBytes int64
	fsFloorBin            string
	fsTLS                 bool
	fsProfileDir          string
	fsParallelFiles       int
	nodeAgentArgs         []string

	serverArgs     []string
	workDir        string
	keep           bool
	jsonOut        string
	backupTimeout  time.Duration
	restoreTimeout time.Duration
	pause          time.Duration
}

func (c config) backup() bool   { return len(c.sizes) > 0 }
func (c config) restore() bool  { return len(c.restoreSizes) > 0 }
func (c config) verify() bool   { return len(c.verifySizes) > 0 }
func (c config) plugin() bool   { return len(c.pluginSizes) > 0 }
func (c config) deletion() bool { return len(c.deleteSizes) > 0 }
func (c config) csi() bool      { return len(c.csiSizes) > 0 }
func (c config) fs() bool       { return c.fsBytes > 0 }

func main() {
	var c config
	var sizes, restoreSizes, verifySizes, pluginSizes, deleteSizes, csiSizes, serverArgs string
	var fsBytes, fsSmallBytes, nodeAgentArgs string
	var skipBackup bool
	flag.StringVar(&sizes, "n", "2000,10000,50000", "comma-separated numbers of ConfigMaps to back up, one measurement each")
	flag.StringVar(&restoreSizes, "restore-n", "", "comma-separated numbers of ConfigMaps to restore, one measurement each (empty: no restore measurement)")
	flag.StringVar(&verifySizes, "verify-n", "", "comma-separated numbers of ConfigMaps in a backup to verify with a restore dry run (backup verify --restore-dry-run), against -createfloor --dry-run, one measurement each (empty: no verify measurement)")
	flag.StringVar(&deleteSizes, "delete-n", "", "comma-separated numbers of ConfigMaps in a backup to delete with two DeleteItemActions (-delete-plugin and a built-in), one measurement each (empty: no deletion measurement)")
	flag.StringVar(&c.deletePluginBin, "delete-plugin", "", "the DeleteItemAction plugin binary (go build ./bench/deleteplugin); needed for -delete-n")
	flag.StringVar(&csiSizes, "csi-n", "", "comma-separated numbers of CSI claims to back up with snapshots and delete, against -csifloor, one measurement each (empty: no CSI measurement)")
	flag.StringVar(&c.csiFloorBin, "csifloor", "", "the CSI floor binary (go build ./bench/csifloor); needed for -csi-n")
	flag.IntVar(&c.csiVolumeBytes, "csi-volume-bytes", 64<<10, "bytes written into each claim's volume (the driver's state directory) before the backups, so each snapshot copies a file")
	flag.StringVar(&fsBytes, "fs-bytes", "", "file-system backup: size of the volume of mixed files to back up with fs-backup against -fsfloor, e.g. 1Gi (empty: no file-system measurement)")
	flag.StringVar(&fsSmallBytes, "fs-small-bytes", "256Mi", "file-system backup: a second, smaller volume backed up once by a node agent of its own, to compare its peak RSS (0: none)")
	flag.StringVar(&c.fsFloorBin, "fsfloor", "", "the file-system floor binary (go build ./bench/fsfloor); needed for -fs-bytes")
	flag.BoolVar(&c.fsTLS, "fs-tls", true, "file-system backup: serve the S3 store over HTTPS (as deployments do); false: plain HTTP")
	flag.StringVar(&c.fsProfileDir, "fs-profile-dir", "", "file-system backup: write each node agent's CPU profile (go tool pprof) into this directory")
	flag.IntVar(&c.fsParallelFiles, "fs-parallel-files", 0, "file-system backup: the Backups' uploaderConfig.parallelFilesUpload (files read at once; 0: unset, one per CPU)")
	flag.StringVar(&nodeAgentArgs, "node-agent-args", "", "extra arguments for `lifeboat node-agent`, space-separated")
	flag.StringVar(&pluginSizes, "plugin-n", "", "comma-separated numbers of ConfigMaps to back up with and without one external BackupItemAction (-plugin), one measurement each (empty: no plugin measurement)")
	flag.BoolVar(&skipBackup, "skip-backup", false, "no backup throughput measurement (ignore -n)")
	flag.IntVar(&c.runs, "runs", 3, "measured runs of each side per N, backup and restore; the tables report medians")
	flag.IntVar(&c.warmup, "warmup", 1, "unmeasured backup runs of each side per N first, so neither side pays for a cold API server cache (plugin measurement: per server process, before its measured backup)")
	flag.IntVar(&c.restoreWarmup, "restore-warmup", 0, "unmeasured restore runs of each side per N first (each adds N objects to the cluster)")
	flag.IntVar(&c.namespaces, "namespaces", 20, "namespaces the ConfigMaps are spread over")
	flag.IntVar(&c.itemBytes, "item-bytes", 1536, "approximate size of each ConfigMap's JSON as the API server returns it")
	flag.IntVar(&c.workers, "workers", 16, "concurrent creates while populating the cluster")
	flag.IntVar(&c.restoreWorkers, "restore-workers", 8, "concurrent creates of the create floor (Lifeboat's restore creates 8 items of a type at a time)")
	flag.StringVar(&c.lifeboatBin, "lifeboat", "bin/lifeboat", "the lifeboat binary to run as the server")
	flag.StringVar(&c.floorBin, "floor", "", "the backup floor binary (go build ./bench/floor); needed for -n")
	flag.StringVar(&c.createFloorBin, "createfloor", "", "the create floor binary (go build ./bench/createfloor); needed for -restore-n and -verify-n")
	flag.StringVar(&c.pluginBin, "plugin", "", "the BackupItemAction plugin binary (go build ./examples/plugins/annotate); needed for -plugin-n")
	flag.StringVar(&serverArgs, "server-args", "", "extra arguments for `lifeboat server`, space-separated, after the benchmark's own (e.g. \"--client-qps=2000 --client-burst=2000\" to see what the rate limit costs)")
	flag.StringVar(&c.workDir, "workdir", "", "where kubeconfigs, stores, archives and server logs go (default: a new temporary directory)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory afterwards")
	flag.StringVar(&c.jsonOut, "json", "", "also write the raw results as JSON to this file")
	flag.DurationVar(&c.pause, "pause", 3*time.Second, "idle time before each measurement, so that client-side rate limiters refill and the API server settles (see README)")
	flag.DurationVar(&c.backupTimeout, "backup-timeout", 30*time.Minute, "how long one backup may take before the benchmark gives up")
	flag.DurationVar(&c.restoreTimeout, "restore-timeout", 30*time.Minute, "how long one restore, verification or create floor run may take before the benchmark gives up")
	flag.Parse()

	// envtest logs through controller-runtime; without a logger it prints
	// a stack trace to say it has none. Its messages are not needed here.
	ctrllog.SetLogger(logr.Discard())

	if skipBackup {
		sizes = ""
	}
	c.serverArgs = strings.Fields(serverArgs)
	c.nodeAgentArgs = strings.Fields(nodeAgentArgs)
	var err error
	if c.fsBytes, err = parseBytes("-fs-bytes", fsBytes); err == nil {
		c.fsSmallBytes, err = parseBytes("-fs-small-bytes", fsSmallBytes)
	}
	if err == nil {
		err = c.validate(sizes, restoreSizes, pluginSizes, deleteSizes, csiSizes, verifySizes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "backupbench:", err)
		os.Exit(2)
	}
	// SIGINT/SIGTERM cancel the context so that the cluster and the server
	// are stopped cleanly; Pdeathsig covers the case where we are killed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c)
	res.write(os.Stdout, c)
	if c.jsonOut != "" && !res.empty() {
		if jerr := writeJSON(c.jsonOut, c, res); jerr != nil {
			fmt.Fprintln(os.Stderr, "backupbench:", jerr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "backupbench:", err)
		os.Exit(1)
	}
}

// parseBytes reads a size such as 1Gi, 256Mi or 1073741824; empty is 0.
func parseBytes(flagName, s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("invalid size %q in %s: want bytes, or a quantity such as 256Mi or 1Gi", s, flagName)
	}
	return q.Value(), nil
}

func parseSizes(flagName, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("invalid N %q in %s: want positive integers separated by commas", f, flagName)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *config) validate(sizes, restoreSizes, pluginSizes, deleteSizes, csiSizes, verifySizes string) error {
	var err error
	if c.sizes, err = parseSizes("-n", sizes); err != nil {
		return err
	}
	if c.restoreSizes, err = parseSizes("-restore-n", restoreSizes); err != nil {
		return err
	}
	if c.verifySizes, err = parseSizes("-verify-n", verifySizes); err != nil {
		return err
	}
	if c.pluginSizes, err = parseSizes("-plugin-n", pluginSizes); err != nil {
		return err
	}
	if c.deleteSizes, err = parseSizes("-delete-n", deleteSizes); err != nil {
		return err
	}
	if c.csiSizes, err = parseSizes("-csi-n", csiSizes); err != nil {
		return err
	}
	switch {
	case !c.backup() && !c.restore() && !c.verify() && !c.plugin() && !c.deletion() && !c.csi() && !c.fs():
		return errors.New("nothing to measure: -n (or -skip-backup), -restore-n, -verify-n, -plugin-n, -delete-n, -csi-n and -fs-bytes name no sizes")
	case c.runs < 1:
		return errors.New("-runs must be at least 1")
	case c.warmup < 0 || c.restoreWarmup < 0:
		return errors.New("-warmup and -restore-warmup must not be negative")
	case c.namespaces < 1:
		return errors.New("-namespaces must be at least 1")
	case c.pause < 0:
		return errors.New("-pause must not be negative")
	case c.workers < 1 || c.restoreWorkers < 1:
		return errors.New("-workers and -restore-workers must be at least 1")
	case c.backup() && c.floorBin == "":
		return errors.New("-floor is required to measure backups (go build -o FLOOR ./bench/floor)")
	case (c.restore() || c.verify()) && c.createFloorBin == "":
		return errors.New("-createfloor is required to measure restores and verifications (go build -o CREATEFLOOR ./bench/createfloor)")
	case c.plugin() && c.pluginBin == "":
		return errors.New("-plugin is required to measure plugin overhead (go build -o PLUGIN ./examples/plugins/annotate)")
	case c.deletion() && c.deletePluginBin == "":
		return errors.New("-delete-plugin is required to measure deletions (go build -o PLUGIN ./bench/deleteplugin)")
	case c.csi() && c.csiFloorBin == "":
		return errors.New("-csifloor is required to measure CSI snapshots (go build -o CSIFLOOR ./bench/csifloor)")
	case c.csiVolumeBytes < 0:
		return errors.New("-csi-volume-bytes must not be negative")
	case c.fs() && c.fsFloorBin == "":
		return errors.New("-fsfloor is required to measure file-system backup (go build -o FSFLOOR ./bench/fsfloor)")
	}
	bins := []*string{&c.lifeboatBin}
	if c.backup() {
		bins = append(bins, &c.floorBin)
	}
	if c.restore() || c.verify() {
		bins = append(bins, &c.createFloorBin)
	}
	if c.plugin() {
		bins = append(bins, &c.pluginBin)
	}
	if c.deletion() {
		bins = append(bins, &c.deletePluginBin)
	}
	if c.csi() {
		bins = append(bins, &c.csiFloorBin)
	}
	if c.fs() {
		bins = append(bins, &c.fsFloorBin)
	}
	for _, p := range bins {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", *p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("binary not found: %w", err)
		}
		*p = abs
	}
	return nil
}

// results is everything measured, each measurement's sizes in order.
type results struct {
	backups  []sizeResult
	restores []restoreSizeResult
	verifies []verifySizeResult
	plugins  []pluginSizeResult
	deletes  []deleteSizeResult
	csis     []csiSizeResult
	fs       *fsResult
}

func (r results) empty() bool {
	return len(r.backups)+len(r.restores)+len(r.verifies)+len(r.plugins)+len(r.deletes)+len(r.csis) == 0 && r.fs == nil
}

// write prints the report of every measurement that measured something,
// a blank line between them.
func (r results) write(w io.Writer, c config) {
	first := true
	section := func(ok bool, write func()) {
		if !ok {
			return
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		write()
	}
	section(len(r.backups) > 0, func() { writeReport(w, c, r.backups) })
	section(len(r.restores) > 0, func() { writeRestoreReport(w, c, r.restores) })
	section(len(r.verifies) > 0, func() { writeVerifyReport(w, c, r.verifies) })
	section(len(r.plugins) > 0, func() { writePluginReport(w, c, r.plugins) })
	section(len(r.deletes) > 0, func() { writeDeleteReport(w, c, r.deletes) })
	section(len(r.csis) > 0, func() { writeCSIReport(w, c, r.csis) })
	section(r.fs != nil, func() { writeFSReport(w, c, *r.fs) })
}

// run measures every N in turn, each against a fresh cluster, backups
// first, then restores, verifications, plugin overhead, deletions, CSI
// snapshots and
// file-system backup, and returns what it measured even when a later N
// fails.
func run(ctx context.Context, c config) (res results, err error) {
	if c.workDir == "" {
		dir, err := os.MkdirTemp("", "lifeboat-bench-")
		if err != nil {
			return res, fmt.Errorf("creating work directory: %w", err)
		}
		c.workDir = dir
		if !c.keep {
			defer os.RemoveAll(dir)
		}
	}
	logf("work directory %s", c.workDir)
	if err := runConfigMaps(ctx, c, &res); err != nil {
		return res, err
	}
	for _, n := range c.csiSizes {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s, err := measureCSISize(ctx, c, n)
		if len(s.Runs) > 0 {
			res.csis = append(res.csis, s)
		}
		if err != nil {
			return res, fmt.Errorf("CSI N=%d: %w", n, err)
		}
	}
	if c.fs() {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s, err := measureFS(ctx, c)
		if len(s.Main.Runs) > 0 || s.Small != nil && len(s.Small.Runs) > 0 {
			res.fs = &s
		}
		if err != nil {
			return res, fmt.Errorf("file-system backup: %w", err)
		}
	}
	return res, nil
}

// runConfigMaps runs the measurements over ConfigMaps into res.
func runConfigMaps(ctx context.Context, c config, res *results) error {
	for _, n := range c.sizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measureSize(ctx, c, n)
		if err != nil {
			return fmt.Errorf("backup N=%d: %w", n, err)
		}
		res.backups = append(res.backups, s)
	}
	for _, n := range c.restoreSizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measureRestoreSize(ctx, c, n)
		if err != nil {
			return fmt.Errorf("restore N=%d: %w", n, err)
		}
		res.restores = append(res.restores, s)
	}
	for _, n := range c.verifySizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measureVerifySize(ctx, c, n)
		if len(s.Runs) > 0 {
			res.verifies = append(res.verifies, s)
		}
		if err != nil {
			return fmt.Errorf("verify N=%d: %w", n, err)
		}
	}
	for _, n := range c.pluginSizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measurePluginSize(ctx, c, n)
		if err != nil {
			// The pairs measured before the failure are still reported.
			if len(s.Runs) > 0 {
				res.plugins = append(res.plugins, s)
			}
			return fmt.Errorf("plugin N=%d: %w", n, err)
		}
		res.plugins = append(res.plugins, s)
	}
	for _, n := range c.deleteSizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measureDeleteSize(ctx, c, n)
		if len(s.Runs) > 0 {
			res.deletes = append(res.deletes, s)
		}
		if err != nil {
			return fmt.Errorf("delete N=%d: %w", n, err)
		}
	}
	return nil
}

// alternate runs the two sides of measured run i (counted from 0): the
// floor first in even runs, Lifeboat first in odd ones, so that neither
// always meets the API server just after the other has warmed (or loaded)
// it. Each side starts after an idle pause, and the API server's request
// counters are read around it, outside the timed window.
func alternate(ctx context.Context, k *kube, pause time.Duration, i int, floor, lifeboat func() error) (floorCalls, lifeboatCalls requestDelta, err error) {
	floorFirst := i%2 == 0
	for _, isFloor := range []bool{floorFirst, !floorFirst} {
		before, err := apiRequests(ctx, k)
		if err != nil {
			return floorCalls, lifeboatCalls, err
		}
		if err := sleep(ctx, pause); err != nil {
			return floorCalls, lifeboatCalls, err
		}
		side := lifeboat
		if isFloor {
			side = floor
		}
		if err := side(); err != nil {
			return floorCalls, lifeboatCalls, err
		}
		after, err := apiRequests(ctx, k)
		if err != nil {
			return floorCalls, lifeboatCalls, err
		}
		if isFloor {
			floorCalls = after.delta(before)
		} else {
			lifeboatCalls = after.delta(before)
		}
	}
	return floorCalls, lifeboatCalls, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func benchNamespaces(n, count int) []string {
	ns := make([]string, count)
	for i := range ns {
		ns[i] = fmt.Sprintf("bench-%d-%d", n, i)
	}
	return ns
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func writeJSON(path string, c config, res results) error {
	data, err := json.MarshalIndent(struct {
		Runs          int                 `json:"runs"`
		Warmup        int                 `json:"warmup"`
		RestoreWarmup int                 `json:"restoreWarmup"`
		Namespaces    int                 `json:"namespaces"`
		ServerArgs    []string            `json:"serverArgs,omitempty"`
		Results       []sizeResult        `json:"results,omitempty"`
		Restores      []restoreSizeResult `json:"restores,omitempty"`
		Verifies      []verifySizeResult  `json:"verifies,omitempty"`
		Plugins       []pluginSizeResult  `json:"plugins,omitempty"`
		Deletes       []deleteSizeResult  `json:"deletes,omitempty"`
		CSI           []csiSizeResult     `json:"csi,omitempty"`
		FS            *fsResult           `json:"fs,omitempty"`
	}{c.runs, c.warmup, c.restoreWarmup, c.namespaces, c.serverArgs, res.backups, res.restores, res.verifies, res.plugins, res.deletes, res.csis, res.fs}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
