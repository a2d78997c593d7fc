package volumehelper

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// listPageSize keeps one LIST response small in a namespace with many pods;
// the helper reads through an uncached client, so pages come from the API
// server.
const listPageSize = 500

// podIndex maps each claim to the pod volumes that mount it. Asking the API
// server for a claim's pods means listing its namespace's pods, so a
// per-volume lookup costs a LIST per volume (Velero's #9179); instead the
// backup's namespaces are listed once, the first time any claim's pods are
// needed, and a namespace outside them once when first asked about.
type podIndex struct {
	client   crclient.Client
	log      *slog.Logger
	classify func(*corev1.Pod, *corev1.Volume) claimUse

	// preload are the namespaces listed on first need; allNamespaces means
	// one cluster-wide listing instead, leaving out skip.
	preload       []string
	allNamespaces bool
	skip          map[string]bool

	mu        sync.RWMutex
	preloaded bool
	allLoaded bool
	loaded    map[string]bool
	// byClaim is keyed by "namespace/claim".
	byClaim map[string][]claimUse
}

func newPodIndex(c crclient.Client, log *slog.Logger, namespaces, skip []string, classify func(*corev1.Pod, *corev1.Volume) claimUse) *podIndex {
	ix := &podIndex{
		client:   c,
		log:      log,
		classify: classify,
		skip:     map[string]bool{},
		loaded:   map[string]bool{},
		byClaim:  map[string][]claimUse{},
	}
	for _, ns := range namespaces {
		if ns == "*" {
			ix.allNamespaces = true
		} else if ns != "" && !slices.Contains(ix.preload, ns) {
			ix.preload = append(ix.preload, ns)
		}
	}
	if ix.allNamespaces {
		ix.preload = nil
		for _, ns := range skip {
			ix.skip[ns] = true
		}
	}
	return ix
}

// uses returns the pod volumes that mount the claim. The slice is shared;
// callers only read it.
func (ix *podIndex) uses(ctx context.Context, namespace, claim string) ([]claimUse, error) {
	if namespace == "" {
		// Claims are namespaced; "" would mean listing every namespace
		// again for a reference that names no claim.
		return nil, nil
	}
	key := namespace + "/" + claim
	ix.mu.RLock()
	if ix.preloaded && ix.covers(namespace) {
		u := ix.byClaim[key]
		ix.mu.RUnlock()
		return u, nil
	}
	ix.mu.RUnlock()

	// Loading under the write lock makes concurrent first callers wait for
	// one listing instead of each starting its own.
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.preloaded {
		if err := ix.loadPreload(ctx); err != nil {
			return nil, err
		}
		ix.preloaded = true
	}
	if !ix.covers(namespace) {
		if err := ix.load(ctx, namespace); err != nil {
			return nil, err
		}
		ix.log.Debug("indexed pods of a namespace outside the backup's", "namespace", namespace)
	}
	return ix.byClaim[key], nil
}

func (ix *podIndex) covers(namespace string) bool {
	return ix.loaded[namespace] || (ix.allLoaded && !ix.skip[namespace])
}

func (ix *podIndex) loadPreload(ctx context.Context) error {
	if ix.allNamespaces {
		if err := ix.load(ctx, ""); err != nil {
			return err
		}
		ix.allLoaded = true
		ix.log.Info("indexed pods by claim", "namespaces", "all", "claims", len(ix.byClaim))
		return nil
	}
	for _, ns := range ix.preload {
		if ix.loaded[ns] {
			continue
		}
		// A failure leaves the namespaces done so far in place; the next
		// call lists only the rest.
		if err := ix.load(ctx, ns); err != nil {
			return err
		}
	}
	if len(ix.preload) > 0 {
		ix.log.Info("indexed pods by claim", "namespaces", len(ix.preload), "claims", len(ix.byClaim))
	}
	return nil
}

// load lists the pods of namespace ("" for all but skip) and adds them.
// Nothing is added unless every page was read, so a failed listing can be
// retried without counting a pod twice.
func (ix *podIndex) load(ctx context.Context, namespace string) error {
	found := map[string][]claimUse{}
	opts := []crclient.ListOption{crclient.Limit(listPageSize)}
	if namespace != "" {
		opts = append(opts, crclient.InNamespace(namespace))
	}
	cont := ""
	for {
		page := opts
		if cont != "" {
			page = append(slices.Clip(opts), crclient.Continue(cont))
		}
		var list corev1.PodList
		if err := ix.client.List(ctx, &list, page...); err != nil {
			where := "all namespaces"
			if namespace != "" {
				where = "namespace " + namespace
			}
			return fmt.Errorf("volumehelper: listing pods in %s to find the pods of each claim: %w", where, err)
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if namespace == "" && ix.skip[pod.Namespace] {
				continue
			}
			ix.add(found, pod)
		}
		cont = list.Continue
		if cont == "" {
			break
		}
	}
	for k, u := range found {
		ix.byClaim[k] = append(ix.byClaim[k], u...)
	}
	if namespace != "" {
		ix.loaded[namespace] = true
	}
	return nil
}

func (ix *podIndex) add(found map[string][]claimUse, pod *corev1.Pod) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claim string
		switch {
		case vol.PersistentVolumeClaim != nil:
			claim = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claim = ephemeralClaimName(pod.Name, vol.Name)
		default:
			continue
		}
		key := pod.Namespace + "/" + claim
		found[key] = append(found[key], ix.classify(pod, vol))
	}
}
