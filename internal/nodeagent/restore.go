package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// WaitInitContainer is the init container a restore puts first in a pod
// whose volumes are restored by file-system restore (Velero's name): it
// waits for the done marker of every such volume, so the pod's own
// containers start on restored data.
const WaitInitContainer = "restore-wait"

// DoneDir is the directory, in a restored volume, of the done markers the
// wait container looks for: one empty file per restore, named after the
// Restore's UID (Velero's layout).
const DoneDir = ".velero"

var errNoOwner = errors.New("the PodVolumeRestore has no owner: the done marker is named after its Restore's UID, read from its first owner reference")

// RestoreReconciler carries out the PodVolumeRestores of pods on this node.
type RestoreReconciler struct{ *agent }

func restoreKey(name string) string { return "pvr/" + name }

// waitContainerRunning is Velero's test of a pod ready for its volumes'
// data: its restore-wait init container (wherever it is among the init
// containers) is running, so the volumes are mounted and nothing but it
// runs yet.
func waitContainerRunning(pod *corev1.Pod) bool {
	for i, c := range pod.Spec.InitContainers {
		if c.Name == WaitInitContainer {
			return i < len(pod.Status.InitContainerStatuses) && pod.Status.InitContainerStatuses[i].State.Running != nil
		}
	}
	return false
}

// Reconcile moves one PodVolumeRestore through Velero's phases. It is this
// node's once its pod runs here with the wait container running; Accepted
// records the node in status.node, as Velero does.
func (r *RestoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := r.log.With("podvolumerestore", req.Name)
	var pvr v1.PodVolumeRestore
	if err := r.client.Get(ctx, req.NamespacedName, &pvr); err != nil {
		if apierrors.IsNotFound(err) {
			if r.transfers.cancel(restoreKey(req.Name)) {
				log.Info("PodVolumeRestore deleted during its transfer: transfer cancelled")
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	switch phase := pvr.Status.Phase; {
	case isNew(phase):
		if pvr.Spec.Cancel {
			return ctrl.Result{}, r.end(ctx, req.Name, v1.PodVolumePhaseCanceled, "", nil)
		}
		var pod corev1.Pod
		if err := r.client.Get(ctx, objectKey(pvr.Spec.Pod.Namespace, pvr.Spec.Pod.Name), &pod); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil // not (yet) a pod of this node
			}
			return ctrl.Result{}, err
		}
		if !waitContainerRunning(&pod) {
			log.Debug("the pod's restore-wait init container is not running yet")
			return ctrl.Result{}, nil
		}
		t, ok := r.transfers.reserve(restoreKey(req.Name))
		if !ok {
			return ctrl.Result{RequeueAfter: busyRetry}, nil
		}
		return ctrl.Result{}, r.start(ctx, &pvr, t, log)
	case phase == v1.PodVolumePhaseInProgress, phase == v1.PodVolumePhaseCanceling,
		phase == v1.PodVolumePhaseAccepted, phase == v1.PodVolumePhasePrepared:
		if pvr.Status.Node != r.node || !pvr.Spec.Cancel {
			return ctrl.Result{}, nil
		}
		if t := r.transfers.get(restoreKey(req.Name)); t != nil {
			if _, err := update(ctx, r.client, r.reader, req.NamespacedName, &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
				if final(p.Status.Phase) || p.Status.Phase == v1.PodVolumePhaseCanceling {
					return false
				}
				p.Status.Phase = v1.PodVolumePhaseCanceling
				return true
			}); err != nil {
				return ctrl.Result{}, fmt.Errorf("marking PodVolumeRestore %s Canceling: %w", req.Name, err)
			}
			log.Info("cancelling the transfer")
			t.requestCancel()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.end(ctx, req.Name, v1.PodVolumePhaseCanceled, "", nil)
	}
	return ctrl.Result{}, nil
}

func (r *RestoreReconciler) start(ctx context.Context, pvr *v1.PodVolumeRestore, t *transfer, log *slog.Logger) error {
	key := restoreKey(pvr.Name)
	started := false
	defer func() {
		if !started {
			r.transfers.release(key)
		}
	}()
	accepted, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvr), &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
		if !isNew(p.Status.Phase) || p.Spec.Cancel {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseAccepted
		p.Status.AcceptedTimestamp = r.stamp()
		p.Status.Node = r.node
		return true
	})
	if err != nil || !accepted {
		return err
	}
	log.Info("accepted")
	sparse, parallel, err := podvolume.RestoreSettings(pvr.Spec.UploaderSettings)
	if err != nil {
		return r.end(ctx, pvr.Name, v1.PodVolumePhaseFailed, "error reading the uploader settings", err)
	}
	_, path, err := r.volumePath(ctx, pvr.Spec.Pod.Namespace, pvr.Spec.Pod.Name, pvr.Spec.Volume)
	if err != nil {
		return r.end(ctx, pvr.Name, v1.PodVolumePhaseFailed, "error preparing the volume", err)
	}
	bsl, err := r.location(ctx, pvr.Spec.BackupStorageLocation)
	if err != nil {
		return r.end(ctx, pvr.Name, v1.PodVolumePhaseFailed, "error preparing the volume", err)
	}
	if len(pvr.OwnerReferences) == 0 {
		return r.end(ctx, pvr.Name, v1.PodVolumePhaseFailed, "error preparing the volume", errNoOwner)
	}
	if _, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvr), &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
		if p.Status.Phase != v1.PodVolumePhaseAccepted {
			return false
		}
		p.Status.Phase = v1.PodVolumePhasePrepared
		return true
	}); err != nil {
		return err
	}
	var current v1.PodVolumeRestore
	inProgress, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvr), &current, func(p *v1.PodVolumeRestore) bool {
		if p.Status.Phase != v1.PodVolumePhasePrepared || p.Spec.Cancel {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseInProgress
		p.Status.StartTimestamp = r.stamp()
		return true
	})
	if err != nil {
		return err
	}
	if !inProgress {
		if current.Spec.Cancel && !final(current.Status.Phase) {
			return r.end(ctx, pvr.Name, v1.PodVolumePhaseCanceled, "", nil)
		}
		return nil
	}
	log.Info("transfer starts", "path", path)
	started = true
	go r.run(t, current.DeepCopy(), path, bsl, restoreSettings{sparse: sparse, parallel: parallel}, log)
	return nil
}

// restoreSettings are a PodVolumeRestore's uploader settings, as read.
type restoreSettings struct {
	sparse   bool
	parallel int
}

func (r *RestoreReconciler) run(t *transfer, pvr *v1.PodVolumeRestore, path string, bsl *v1.BackupStorageLocation, set restoreSettings, log *slog.Logger) {
	defer r.transfers.release(restoreKey(pvr.Name))
	ctx := t.start(r.base)
	defer t.done()
	progress := startProgress(r.client, pvr, r.progress, log)
	written, err := r.dataPath.Restore(ctx, podvolume.RestoreRequest{
		Repository: podvolume.Repository{Location: bsl, VolumeNamespace: pvr.Spec.SourceNamespace},
		SnapshotID: pvr.Spec.SnapshotID,
		Path:       path,
		Progress:   progress.set,

		WriteSparseFiles:      set.sparse,
		ParallelFilesDownload: set.parallel,
	})
	progress.stop()
	if err == nil {
		// The restore-wait container exits once it sees this: only
		// after every byte is in the volume.
		err = writeDoneMarker(path, string(pvr.OwnerReferences[0].UID))
		if err != nil {
			err = fmt.Errorf("releasing the pod: %w", err)
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var werr error
	switch {
	case err == nil:
		werr = r.complete(wctx, pvr.Name, written)
		log.Info("transfer completed", "bytes", written)
	case t.wasCancelled():
		werr = r.end(wctx, pvr.Name, v1.PodVolumePhaseCanceled, "", nil)
		log.Info("transfer cancelled")
	case r.base.Err() != nil:
		werr = r.end(wctx, pvr.Name, v1.PodVolumePhaseFailed, "", fmt.Errorf("the node agent on node %s stopped during the transfer", r.node))
		log.Warn("transfer stopped with the node agent")
	default:
		werr = r.end(wctx, pvr.Name, v1.PodVolumePhaseFailed, "data path restore failed", err)
		log.Error("transfer failed", "error", err)
	}
	if werr != nil {
		log.Error("writing the transfer's outcome", "error", werr)
	}
}

// writeDoneMarker replaces the volume's done markers by this restore's:
// markers of earlier restores of the same data are not carried over.
func writeDoneMarker(volume, restoreUID string) error {
	dir := filepath.Join(volume, DoneDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	marker := filepath.Join(dir, restoreUID)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", marker, err)
	}
	return nil
}

func (r *RestoreReconciler) complete(ctx context.Context, name string, written int64) error {
	_, err := update(ctx, r.client, r.reader, objectKey(r.namespace, name), &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
		if final(p.Status.Phase) {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseCompleted
		p.Status.CompletionTimestamp = r.stamp()
		p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: written, BytesDone: written}
		return true
	})
	return err
}

func (r *RestoreReconciler) end(ctx context.Context, name string, phase v1.PodVolumePhase, what string, cause error) error {
	_, err := update(ctx, r.client, r.reader, objectKey(r.namespace, name), &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
		if final(p.Status.Phase) {
			return false
		}
		p.Status.Phase = phase
		now := r.stamp()
		if p.Status.StartTimestamp == nil {
			p.Status.StartTimestamp = now
		}
		p.Status.CompletionTimestamp = now
		if m := message(what, cause); m != "" {
			p.Status.Message = m
		}
		return true
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SetupWithManager registers the reconciler; a pod of this node changing
// (its wait container starting) wakes the PodVolumeRestores that name it.
func (r *RestoreReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("podvolumerestore").
		For(&v1.PodVolumeRestore{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.restoresOfPod)).
		Complete(r)
}

func (r *RestoreReconciler) restoresOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1.PodVolumeRestoreList
	if err := r.client.List(ctx, &list, client.InNamespace(r.namespace)); err != nil {
		r.log.Warn("listing PodVolumeRestores for a pod", "pod", podRef(obj.GetNamespace(), obj.GetName()), "error", err)
		return nil
	}
	var out []reconcile.Request
	for _, pvr := range list.Items {
		if pvr.Spec.Pod.Namespace == obj.GetNamespace() && pvr.Spec.Pod.Name == obj.GetName() && isNew(pvr.Status.Phase) {
			out = append(out, reconcile.Request{NamespacedName: objectKey(pvr.Namespace, pvr.Name)})
		}
	}
	return out
}
