// Command createfloor is the restore benchmark's yardstick: the least a
// restore of ConfigMaps can cost on a given machine and API server. It reads
// a backup's tar.gz (Velero's layout) from local disk, takes the namespaces
// and ConfigMaps of the given namespaces, strips the metadata the source API
// server set, renames each namespace to <namespace><suffix>, and creates
// the namespaces, then the ConfigMaps, through the API with client-go,
// a fixed number of creates at a time. Nothing of Lifeboat is in it on
// purpose: the benchmark compares Lifeboat's restore against what a plain
// client-go program does with the same objects, measured in the same run.
//
// With --dry-run every create is sent with dryRun=All: the API server
// checks each object (schema, admission, quota, conflicts) and stores
// nothing, as a restore dry run's creates are sent; that is the floor of
// `lifeboat backup verify --restore-dry-run`. Such a dry run usually meets
// target namespaces that exist (an object in a missing namespace cannot
// be checked at all), so a namespace answered AlreadyExists is not an
// error then.
//
// It prints one line, `objects=<n> namespaces=<n> read_seconds=<s>
// create_seconds=<s> seconds=<s> peak_rss_kib=<k>`, where seconds covers
// reading the archive and creating (not process start and client setup)
// and peak_rss_kib is the process's VmHWM at the end.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lifeboat-io/lifeboat/bench/internal/selfrss"
)

// callTimeout bounds each create; a small object takes milliseconds, so a
// minute only trips on a wedged API server.
const callTimeout = time.Minute

// The labels a Velero-compatible restore puts on what it creates; the
// floor sets them too, so that both sides write the same objects.
const (
	backupNameLabel  = "velero.io/backup-name"
	restoreNameLabel = "velero.io/restore-name"
	metadataNameKey  = "kubernetes.io/metadata.name"
)

type options struct {
	kubeconfig  string
	archive     string
	namespaces  map[string]bool
	suffix      string
	workers     int
	backupName  string
	restoreName string
	dryRun      bool
}

func main() {
	var o options
	var namespaces string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to create the objects in")
	flag.StringVar(&o.archive, "archive", "", "the backup's tar.gz")
	flag.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces whose ConfigMaps (and namespace objects) are created (empty: all)")
	flag.StringVar(&o.suffix, "suffix", "", "appended to every namespace name, as a restore's namespaceMapping would rename them")
	flag.IntVar(&o.workers, "workers", 8, "concurrent creates")
	flag.StringVar(&o.backupName, "backup-name", "", "value of the velero.io/backup-name label put on created objects")
	flag.StringVar(&o.restoreName, "restore-name", "createfloor", "value of the velero.io/restore-name label put on created objects")
	flag.BoolVar(&o.dryRun, "dry-run", false, "send every create with dryRun=All (nothing is stored); a namespace that already exists is then fine")
	flag.Parse()
	if o.kubeconfig == "" || o.archive == "" || o.suffix == "" || o.workers < 1 {
		fmt.Fprintln(os.Stderr, "createfloor: --kubeconfig, --archive and a non-empty --suffix are required, and --workers must be at least 1")
		os.Exit(2)
	}
	o.namespaces = map[string]bool{}
	for ns := range strings.SplitSeq(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.namespaces[ns] = true
		}
	}
	res, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "createfloor:", err)
		os.Exit(1)
	}
	hwm, err := selfrss.PeakKiB()
	if err != nil {
		fmt.Fprintln(os.Stderr, "createfloor:", err)
		os.Exit(1)
	}
	fmt.Printf("objects=%d namespaces=%d read_seconds=%.6f create_seconds=%.6f seconds=%.6f peak_rss_kib=%d\n",
		res.namespaces+res.configMaps, res.namespaces, res.read.Seconds(), res.create.Seconds(), (res.read + res.create).Seconds(), hwm)
}

type result struct {
	namespaces, configMaps int
	read, create           time.Duration
}

func run(o options) (res result, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return res, fmt.Errorf("loading kubeconfig %s: %w", o.kubeconfig, err)
	}
	// Far above what the API server can take: the floor measures the API
	// server, not client-go's rate limiter (default 5 qps).
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating client: %w", err)
	}

	start := time.Now()
	namespaces, configMaps, err := readArchive(o)
	if err != nil {
		return res, err
	}
	res.read = time.Since(start)

	start = time.Now()
	if err := createObjects(context.Background(), cs, o, namespaces, configMaps); err != nil {
		return res, err
	}
	res.create = time.Since(start)
	res.namespaces, res.configMaps = len(namespaces), len(configMaps)
	return res, nil
}

// createObjects creates the namespaces, then the ConfigMaps: a ConfigMap
// cannot be created (nor checked, in a dry run) before its namespace
// exists.
func createObjects(ctx context.Context, cs kubernetes.Interface, o options, namespaces []*corev1.Namespace, configMaps []*corev1.ConfigMap) error {
	opts := metav1.CreateOptions{}
	if o.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if err := createAll(ctx, o.workers, namespaces, func(ctx context.Context, ns *corev1.Namespace) error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, opts)
		if o.dryRun && apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	return createAll(ctx, o.workers, configMaps, func(ctx context.Context, cm *corev1.ConfigMap) error {
		_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, opts)
		return err
	})
}

// readArchive reads the namespaces and ConfigMaps to create from the
// archive, already prepared for their new namespaces. It reads the
// unversioned copy of each item (resources/<resource>/namespaces/<ns>/ and
// resources/<resource>/cluster/) and skips the rest, the
// <version>-preferredversion copy included.
func readArchive(o options) ([]*corev1.Namespace, []*corev1.ConfigMap, error) {
	f, err := os.Open(o.archive)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the archive: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", o.archive, err)
	}
	tr := tar.NewReader(gz)
	var namespaces []*corev1.Namespace
	var configMaps []*corev1.ConfigMap
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", o.archive, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		kind, ns, _ := entry(hdr.Name)
		switch {
		case kind == "configmaps" && o.keep(ns):
			cm := &corev1.ConfigMap{}
			if err := decode(tr, hdr.Name, cm); err != nil {
				return nil, nil, err
			}
			prepare(&cm.ObjectMeta, o)
			cm.Namespace += o.suffix
			configMaps = append(configMaps, cm)
		case kind == "namespaces":
			nsObj := &corev1.Namespace{}
			if err := decode(tr, hdr.Name, nsObj); err != nil {
				return nil, nil, err
			}
			if !o.keep(nsObj.Name) {
				continue
			}
			prepare(&nsObj.ObjectMeta, o)
			nsObj.Name += o.suffix
			nsObj.Labels[metadataNameKey] = nsObj.Name
			nsObj.Status = corev1.NamespaceStatus{}
			namespaces = append(namespaces, nsObj)
		}
	}
	return namespaces, configMaps, nil
}

func (o options) keep(ns string) bool { return len(o.namespaces) == 0 || o.namespaces[ns] }

// entry tells what an archive path holds: "configmaps" with the item's
// namespace for resources/configmaps/namespaces/<ns>/<name>.json,
// "namespaces" for resources/namespaces/cluster/<name>.json, "" otherwise.
func entry(path string) (kind, namespace, name string) {
	p := strings.Split(path, "/")
	switch {
	case len(p) == 5 && p[0] == "resources" && p[1] == "configmaps" && p[2] == "namespaces" && strings.HasSuffix(p[4], ".json"):
		return "configmaps", p[3], strings.TrimSuffix(p[4], ".json")
	case len(p) == 4 && p[0] == "resources" && p[1] == "namespaces" && p[2] == "cluster" && strings.HasSuffix(p[3], ".json"):
		return "namespaces", "", strings.TrimSuffix(p[3], ".json")
	}
	return "", "", ""
}

func decode(r io.Reader, name string, into any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading %s from the archive: %w", name, err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decoding %s: %w", name, err)
	}
	return nil
}

// prepare drops what the source API server set, which a create must not
// carry, and labels the object as a restore would.
func prepare(m *metav1.ObjectMeta, o options) {
	m.UID = ""
	m.ResourceVersion = ""
	m.CreationTimestamp = metav1.Time{}
	m.ManagedFields = nil
	m.Generation = 0
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[backupNameLabel] = o.backupName
	m.Labels[restoreNameLabel] = o.restoreName
}

// createAll creates items with workers concurrent calls and stops at the
// first error: the floor creates into fresh namespaces (or, in a dry run,
// checks against namespaces made for it), so any refusal is a fault of
// the benchmark, not something to work around.
func createAll[T metav1.Object](ctx context.Context, workers int, items []T, create func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan T)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range next {
				cctx, ccancel := context.WithTimeout(ctx, callTimeout)
				err := create(cctx, it)
				ccancel()
				if err != nil {
					cancel(fmt.Errorf("creating %s/%s: %w", it.GetNamespace(), it.GetName(), err))
					return
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
