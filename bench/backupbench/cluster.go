package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

const (
	// serverNamespace is where the server and its velero.io objects live.
	serverNamespace = "velero"
	// locationName is the BackupStorageLocation every bench backup uses.
	locationName = "bench"
	bucket       = "bench"
	// callTimeout bounds one API call; the local API server answers in
	// milliseconds, so this only trips when it is wedged.
	callTimeout = 30 * time.Second
)

// kube holds the clients the orchestrator uses. Its own traffic is small
// next to what it measures and never overlaps a measurement, except for the
// one watch on the backup being timed.
type kube struct {
	cs kubernetes.Interface
	c  client.WithWatch
}

func newKube(cfg *rest.Config) (*kube, error) {
	cfg = rest.CopyConfig(cfg)
	// Populating 50,000 objects from 16 workers must not wait on a
	// client-side rate limiter.
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	// The CSI measurement checks what is left of the snapshots.
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating velero.io client: %w", err)
	}
	return &kube{cs: cs, c: c}, nil
}

// populate creates the server's namespace, the bench namespaces and n
// ConfigMaps spread round-robin over them, concurrently. It returns the
// average size of a ConfigMap's JSON as the API server stores it.
func populate(ctx context.Context, k *kube, namespaces []string, n, itemBytes, workers int) (float64, error) {
	for _, ns := range append([]string{serverNamespace}, namespaces...) {
		if err := createNamespace(ctx, k, ns); err != nil {
			return 0, err
		}
	}
	payload := payloadBytes(itemBytes)
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				cm := benchConfigMap(namespaces[i%len(namespaces)], i, payload)
				if err := createWithRetry(ctx, func(ctx context.Context) error {
					_, err := k.cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
					return err
				}); err != nil {
					errs <- fmt.Errorf("creating configmap %s/%s: %w", cm.Namespace, cm.Name, err)
					cancel()
					return
				}
			}
		})
	}
	var sendErr error
send:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			sendErr = ctx.Err()
			break send
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if sendErr != nil {
		return 0, fmt.Errorf("populating the cluster: %w", sendErr)
	}
	return measureItemBytes(ctx, k, namespaces[0])
}

func createNamespace(ctx context.Context, k *kube, name string) error {
	err := createWithRetry(ctx, func(ctx context.Context) error {
		_, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// createWithRetry retries the transient refusals a busy API server gives
// under a burst of creates; anything else is returned at once.
func createWithRetry(ctx context.Context, create func(context.Context) error) error {
	var err error
	for attempt := range 5 {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err = create(cctx)
		cancel()
		if err == nil || !(apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)) {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// payloadBytes is how much data to put in each ConfigMap so that its JSON,
// with the metadata the API server adds (uid, resourceVersion, timestamps,
// managedFields), comes to about itemBytes.
func payloadBytes(itemBytes int) int {
	const overhead = 580
	return max(itemBytes-overhead, 64)
}

// words make the payload look like configuration rather than noise: gzip
// shrinks it about as much as it shrinks real ConfigMaps, so compression
// costs what it would in a real cluster.
var words = strings.Fields(`server port host timeout retries enabled disabled true false
	log level info debug replicas image tag pull policy always memory cpu limit request
	path url https http tls cert key secret token user name value env config mode read write`)

func benchConfigMap(ns string, i, payload int) *corev1.ConfigMap {
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	data := map[string]string{}
	const keys = 3
	for k := range keys {
		var b strings.Builder
		for b.Len() < payload/keys {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
			fmt.Fprintf(&b, "=%d", rng.IntN(100000))
		}
		data[fmt.Sprintf("setting-%d", k)] = b.String()
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      fmt.Sprintf("cm-%06d", i),
			Labels:    map[string]string{"app.kubernetes.io/name": "lifeboat-bench"},
		},
		Data: data,
	}
}

// measureItemBytes reads back one page of ConfigMaps as JSON to report the
// real item size next to the results.
func measureItemBytes(ctx context.Context, k *kube, ns string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body, err := k.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "configmaps").
		Param("limit", "100").SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return 0, fmt.Errorf("reading back configmaps in %s: %w", ns, err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("decoding configmaps in %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return 0, fmt.Errorf("no configmaps in %s after populating", ns)
	}
	total := 0
	for _, it := range list.Items {
		total += len(it)
	}
	return float64(total) / float64(len(list.Items)), nil
}

// createLocation creates the storage location the backups go to: the
// embedded filesystem provider over a directory of its own.
func createLocation(ctx context.Context, k *kube, root string) error {
	if err := os.MkdirAll(filepath.Join(root, bucket), 0o755); err != nil {
		return fmt.Errorf("creating the store directory: %w", err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: locationName},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": root},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: ""}},
		},
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := k.c.Create(cctx, bsl); err != nil {
		return fmt.Errorf("creating BackupStorageLocation %s: %w", locationName, err)
	}
	return nil
}

// waitLocationAvailable waits until the server has validated the storage
// location: proof that it is up, connected and able to write, so that no
// measured backup pays for the server's start.
func waitLocationAvailable(ctx context.Context, k *kube, srv *serverProcess, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var bsl v1.BackupStorageLocation
	for {
		if err := srv.exited(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := k.c.Get(cctx, client.ObjectKey{Namespace: serverNamespace, Name: locationName}, &bsl)
		cancel()
		if err != nil {
			return fmt.Errorf("reading BackupStorageLocation %s: %w", locationName, err)
		}
		if bsl.Status.Phase == v1.BackupStorageLocationPhaseAvailable {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("BackupStorageLocation %s not Available after %s (phase %q, message %q; server log %s)",
				locationName, timeout, bsl.Status.Phase, bsl.Status.Message, srv.logPath)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitServerReady waits until a freshly started server answers a
// ServerStatusRequest: its manager is up, its caches have synced and its
// controllers run, so that no measured restore pays for the server's start.
// (After a restart the storage location is still marked Available by the
// previous process, so waitLocationAvailable would prove nothing.)
func waitServerReady(ctx context.Context, k *kube, srv *serverProcess, timeout time.Duration) error {
	ssr := &v1.ServerStatusRequest{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, GenerateName: "bench-ready-"}}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := k.c.Create(cctx, ssr)
	cancel()
	if err != nil {
		return fmt.Errorf("creating a ServerStatusRequest: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := srv.exited(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := k.c.Get(cctx, client.ObjectKeyFromObject(ssr), ssr)
		cancel()
		if err != nil {
			return fmt.Errorf("reading ServerStatusRequest %s: %w", ssr.Name, err)
		}
		if ssr.Status.Phase == v1.ServerStatusRequestPhaseProcessed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not answer ServerStatusRequest %s within %s (server log %s)", ssr.Name, timeout, srv.logPath)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
