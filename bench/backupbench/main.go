// Command backupbench measures how fast Lifeboat backs up a cluster against
// a floor: a plain program that LISTs the same objects and writes them into
// a tar.gz, run on the same machine against the same API server in the same
// run. For each N it starts a fresh local kube-apiserver, creates N
// ConfigMaps across 20 namespaces, starts a fresh `lifeboat server` process,
// and alternates floor runs with Lifeboat backups. It prints a markdown
// table of medians and the raw per-run numbers; bench/run.sh is its usual
// entry point and bench/README.md explains the figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

type config struct {
	sizes         []int
	runs          int
	warmup        int
	namespaces    int
	itemBytes     int
	workers       int
	lifeboatBin   string
	floorBin      string
	workDir       string
	keep          bool
	jsonOut       string
	backupTimeout time.Duration
	pause         time.Duration
}

func main() {
	var c config
	var sizes string
	flag.StringVar(&sizes, "n", "2000,10000,50000", "comma-separated numbers of ConfigMaps to back up, one measurement each")
	flag.IntVar(&c.runs, "runs", 3, "measured runs of the floor and of Lifeboat per N; the table reports medians")
	flag.IntVar(&c.warmup, "warmup", 1, "unmeasured runs of each per N first, so neither side pays for a cold API server cache")
	flag.IntVar(&c.namespaces, "namespaces", 20, "namespaces the ConfigMaps are spread over")
	flag.IntVar(&c.itemBytes, "item-bytes", 1536, "approximate size of each ConfigMap's JSON as the API server returns it")
	flag.IntVar(&c.workers, "workers", 16, "concurrent creates while populating the cluster")
	flag.StringVar(&c.lifeboatBin, "lifeboat", "bin/lifeboat", "the lifeboat binary to run as the server")
	flag.StringVar(&c.floorBin, "floor", "", "the floor binary (go build ./bench/floor)")
	flag.StringVar(&c.workDir, "workdir", "", "where kubeconfigs, stores, archives and server logs go (default: a new temporary directory)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory afterwards")
	flag.StringVar(&c.jsonOut, "json", "", "also write the raw results as JSON to this file")
	flag.DurationVar(&c.pause, "pause", 3*time.Second, "idle time before each measurement, so that client-side rate limiters refill and the API server settles (see README)")
	flag.DurationVar(&c.backupTimeout, "backup-timeout", 30*time.Minute, "how long one backup may take before the benchmark gives up")
	flag.Parse()

	// envtest logs through controller-runtime; without a logger it prints
	// a stack trace to say it has none. Its messages are not needed here.
	ctrllog.SetLogger(logr.Discard())

	if err := c.validate(sizes); err != nil {
		fmt.Fprintln(os.Stderr, "backupbench:", err)
		os.Exit(2)
	}
	// SIGINT/SIGTERM cancel the context so that the cluster and the server
	// are stopped cleanly; Pdeathsig covers the case where we are killed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := run(ctx, c)
	if len(results) > 0 {
		writeReport(os.Stdout, c, results)
		if c.jsonOut != "" {
			if jerr := writeJSON(c.jsonOut, c, results); jerr != nil {
				fmt.Fprintln(os.Stderr, "backupbench:", jerr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "backupbench:", err)
		os.Exit(1)
	}
}

func (c *config) validate(sizes string) error {
	for s := range strings.SplitSeq(sizes, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("invalid N %q in -n: want positive integers separated by commas", s)
		}
		c.sizes = append(c.sizes, n)
	}
	switch {
	case len(c.sizes) == 0:
		return errors.New("-n names no sizes")
	case c.runs < 1:
		return errors.New("-runs must be at least 1")
	case c.warmup < 0:
		return errors.New("-warmup must not be negative")
	case c.namespaces < 1:
		return errors.New("-namespaces must be at least 1")
	case c.pause < 0:
		return errors.New("-pause must not be negative")
	case c.workers < 1:
		return errors.New("-workers must be at least 1")
	case c.floorBin == "":
		return errors.New("-floor is required (go build -o FLOOR ./bench/floor)")
	}
	for _, p := range []*string{&c.lifeboatBin, &c.floorBin} {
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

// run measures every N in turn, each against a fresh cluster, and returns
// what it measured even when a later N fails.
func run(ctx context.Context, c config) ([]sizeResult, error) {
	if c.workDir == "" {
		dir, err := os.MkdirTemp("", "lifeboat-bench-")
		if err != nil {
			return nil, fmt.Errorf("creating work directory: %w", err)
		}
		c.workDir = dir
		if !c.keep {
			defer os.RemoveAll(dir)
		}
	}
	logf("work directory %s", c.workDir)
	var results []sizeResult
	for _, n := range c.sizes {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		res, err := measureSize(ctx, c, n)
		if err != nil {
			return results, fmt.Errorf("N=%d: %w", n, err)
		}
		results = append(results, res)
	}
	return results, nil
}

// measureSize runs everything for one N: a fresh cluster, so earlier
// sizes' objects neither slow the LISTs nor count as items, and a fresh
// server, so its peak RSS belongs to this N alone.
func measureSize(ctx context.Context, c config, n int) (res sizeResult, err error) {
	res.N = n
	dir := filepath.Join(c.workDir, fmt.Sprintf("n%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("creating %s: %w", dir, err)
	}

	logf("N=%d: starting a local cluster", n)
	cl, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := cl.Stop(); serr != nil {
			logf("N=%d: stopping the local cluster: %v", n, serr)
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cl.WriteKubeconfig(kubeconfig); err != nil {
		return res, fmt.Errorf("writing kubeconfig: %w", err)
	}
	k, err := newKube(cl.Config)
	if err != nil {
		return res, err
	}

	namespaces := benchNamespaces(n, c.namespaces)
	start := time.Now()
	bytesPerItem, err := populate(ctx, k, namespaces, n, c.itemBytes, c.workers)
	if err != nil {
		return res, err
	}
	res.PopulateSeconds = time.Since(start).Seconds()
	logf("N=%d: created %d ConfigMaps in %.1fs (%.0f/s)", n, n, res.PopulateSeconds, float64(n)/res.PopulateSeconds)

	storeRoot := filepath.Join(dir, "store")
	if err := createLocation(ctx, k, storeRoot); err != nil {
		return res, err
	}
	srv, err := startServer(c.lifeboatBin, kubeconfig, filepath.Join(dir, "server.log"))
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := srv.stop(); serr != nil {
			logf("N=%d: stopping the server: %v (log: %s)", n, serr, srv.logPath)
		}
	}()
	if err := waitLocationAvailable(ctx, k, srv, 2*time.Minute); err != nil {
		return res, err
	}

	floor := floorRunner{bin: c.floorBin, kubeconfig: kubeconfig, namespaces: namespaces, dir: dir}
	lb := backupRunner{k: k, srv: srv, namespaces: namespaces, storeRoot: storeRoot, timeout: c.backupTimeout}
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
		// Alternate which side goes first so that neither always meets the
		// API server just after the other has warmed (or loaded) it.
		floorFirst := i%2 == 0
		for _, isFloor := range []bool{floorFirst, !floorFirst} {
			before, err := apiRequests(ctx, k)
			if err != nil {
				return res, err
			}
			if err := sleep(ctx, c.pause); err != nil {
				return res, err
			}
			if isFloor {
				if r.Floor, err = floor.run(ctx, fmt.Sprintf("run%d", i+1)); err != nil {
					return res, err
				}
			} else if r.Lifeboat, err = lb.run(ctx, fmt.Sprintf("bench-%d-run%d", n, i+1)); err != nil {
				return res, err
			}
			after, err := apiRequests(ctx, k)
			if err != nil {
				return res, err
			}
			if isFloor {
				r.Floor.APIRequests, r.Floor.APILists = after.since(before)
			} else {
				r.Lifeboat.APIRequests, r.Lifeboat.APILists = after.since(before)
			}
		}
		if r.Floor.Items != n {
			return res, fmt.Errorf("the floor archived %d ConfigMaps, want %d", r.Floor.Items, n)
		}
		if r.Lifeboat.Items < n {
			return res, fmt.Errorf("lifeboat backed up %d items, want at least the %d ConfigMaps", r.Lifeboat.Items, n)
		}
		r.Floor.AvgItemBytes = bytesPerItem
		logf("N=%d run %d: floor %.0f items/s (%.3fs), lifeboat %.0f items/s (%.3fs), ratio %.2f",
			n, i+1, r.Floor.ItemsPerSec(), r.Floor.WallSeconds, r.Lifeboat.ItemsPerSec(), r.Lifeboat.WallSeconds, r.Ratio())
		res.Runs = append(res.Runs, r)
	}
	// VmHWM is the peak since the process started: over every backup at
	// this N, warm-ups included.
	st, err := readProcStatus(srv.pid())
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	res.ServerRSSAfterKiB = st.rssKiB
	return res, nil
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

func writeJSON(path string, c config, results []sizeResult) error {
	data, err := json.MarshalIndent(struct {
		Runs       int          `json:"runs"`
		Warmup     int          `json:"warmup"`
		Namespaces int          `json:"namespaces"`
		Results    []sizeResult `json:"results"`
	}{c.runs, c.warmup, c.namespaces, results}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
