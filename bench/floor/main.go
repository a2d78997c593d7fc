// Command floor is the benchmark's yardstick: the least a backup of
// ConfigMaps can cost on a given machine and API server. It LISTs the
// ConfigMaps of the given namespaces cluster-wide, 500 at a time, and writes
// each one's JSON into a gzip-compressed tarball on local disk. Nothing of
// Lifeboat is in it on purpose: the benchmark compares Lifeboat against
// what a plain client-go program does, measured in the same run.
//
// It prints one line, `items=<n> bytes=<json bytes> seconds=<s>
// peak_rss_kib=<k>`, where seconds covers the LISTs and the archive, not
// process start, and peak_rss_kib is the process's VmHWM at the end.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lifeboat-io/lifeboat/bench/internal/selfrss"
)

// pageSize matches what a careful backup tool asks for: large enough to
// keep round trips few, small enough to keep a page's memory bounded.
const pageSize = 500

// callTimeout bounds each LIST call; a page of 500 small objects takes
// milliseconds, so a minute only trips on a wedged API server.
const callTimeout = time.Minute

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to read")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces whose ConfigMaps are archived (empty: all)")
	out := flag.String("out", "", "path of the tar.gz to write")
	flag.Parse()
	if *kubeconfig == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "floor: --kubeconfig and --out are required")
		os.Exit(2)
	}
	res, err := run(*kubeconfig, *namespaces, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	hwm, err := selfrss.PeakKiB()
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	fmt.Printf("items=%d bytes=%d seconds=%.6f peak_rss_kib=%d\n", res.items, res.bytes, res.elapsed.Seconds(), hwm)
}

type result struct {
	items   int
	bytes   int64
	elapsed time.Duration
}

func run(kubeconfig, namespaces, out string) (res result, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return res, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	// client-go's default limit (5 qps) would measure the rate limiter,
	// not the API server.
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating client: %w", err)
	}
	keep := map[string]bool{}
	for ns := range strings.SplitSeq(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			keep[ns] = true
		}
	}

	start := time.Now()
	f, err := os.Create(out)
	if err != nil {
		return res, fmt.Errorf("creating %s: %w", out, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", out, cerr)
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)

	cont := ""
	for {
		list, err := listPage(cs, cont)
		if err != nil {
			return res, err
		}
		for i := range list.Items {
			cm := &list.Items[i]
			if len(keep) > 0 && !keep[cm.Namespace] {
				continue
			}
			// LIST responses leave out each item's apiVersion and kind; a
			// restorable file needs them.
			cm.APIVersion, cm.Kind = "v1", "ConfigMap"
			data, err := json.Marshal(cm)
			if err != nil {
				return res, fmt.Errorf("encoding configmap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
			hdr := &tar.Header{
				Name:     "resources/configmaps/namespaces/" + cm.Namespace + "/" + cm.Name + ".json",
				Mode:     0o644,
				Size:     int64(len(data)),
				ModTime:  start,
				Typeflag: tar.TypeReg,
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return res, fmt.Errorf("writing tar header for %s/%s: %w", cm.Namespace, cm.Name, err)
			}
			if _, err := tw.Write(data); err != nil {
				return res, fmt.Errorf("writing %s/%s to the archive: %w", cm.Namespace, cm.Name, err)
			}
			res.items++
			res.bytes += int64(len(data))
		}
		if list.Continue == "" {
			break
		}
		cont = list.Continue
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return res, fmt.Errorf("finishing the archive: %w", err)
	}
	// No fsync: Lifeboat's filesystem store does not sync either, and the
	// two must do the same work for the comparison to mean anything.
	res.elapsed = time.Since(start)
	return res, nil
}

func listPage(cs kubernetes.Interface, cont string) (*corev1.ConfigMapList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{Limit: pageSize, Continue: cont})
	if err != nil {
		return nil, fmt.Errorf("listing configmaps (continue=%q): %w", cont, err)
	}
	return list, nil
}
