package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hostpods"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// busyRetry is when a transfer that found every slot taken is tried again
// (Velero's requeue for a constrained data path).
const busyRetry = 5 * time.Second

// agent is what both reconcilers share.
type agent struct {
	client    client.Client
	reader    client.Reader
	namespace string
	node      string
	hostPods  string
	dataPath  podvolume.DataPath
	transfers *transfers
	// base is the node agent's lifetime: transfers stop with it.
	base     context.Context
	progress time.Duration
	log      *slog.Logger
	now      func() time.Time
}

func (a *agent) stamp() *metav1.Time { return &metav1.Time{Time: a.now()} }

// location is the storage location named name, from the cache.
func (a *agent) location(ctx context.Context, name string) (*v1.BackupStorageLocation, error) {
	var bsl v1.BackupStorageLocation
	if err := a.client.Get(ctx, objectKey(a.namespace, name), &bsl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("backup storage location %q not found in namespace %s", name, a.namespace)
		}
		return nil, fmt.Errorf("reading backup storage location %q: %w", name, err)
	}
	return &bsl, nil
}

// volumePath finds a pod's volume on this node. The pod comes from the
// cache, which holds only this node's pods.
func (a *agent) volumePath(ctx context.Context, ns, name, volume string) (*corev1.Pod, string, error) {
	var pod corev1.Pod
	err := a.client.Get(ctx, objectKey(ns, name), &pod)
	if apierrors.IsNotFound(err) {
		// Not (yet) in the cache: say where it is, if anywhere.
		err = a.reader.Get(ctx, objectKey(ns, name), &pod)
		if err == nil && pod.Spec.NodeName != a.node {
			return nil, "", fmt.Errorf("pod %s runs on node %q, not on this node agent's node %s", podRef(ns, name), pod.Spec.NodeName, a.node)
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("pod %s not found", podRef(ns, name))
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading pod %s: %w", podRef(ns, name), err)
	}
	path, v, err := hostpods.Resolve(ctx, a.reader, a.hostPods, &pod, volume)
	if err != nil {
		return &pod, "", err
	}
	if v.Block {
		return &pod, "", fmt.Errorf("volume %q of pod %s is a block volume: file-system backup moves files, not block devices", volume, podRef(ns, name))
	}
	return &pod, path, nil
}

// BackupReconciler carries out the PodVolumeBackups of this node.
type BackupReconciler struct{ *agent }

func backupKey(name string) string { return "pvb/" + name }

// Reconcile moves one PodVolumeBackup through Velero's phases: New ->
// Accepted -> Prepared -> InProgress -> Completed, Failed or Canceled
// (through Canceling when a running transfer is cancelled).
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := r.log.With("podvolumebackup", req.Name)
	var pvb v1.PodVolumeBackup
	if err := r.client.Get(ctx, req.NamespacedName, &pvb); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: a transfer still running for it has no one to
			// report to.
			if r.transfers.cancel(backupKey(req.Name)) {
				log.Info("PodVolumeBackup deleted during its transfer: transfer cancelled")
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	mine := pvb.Spec.Node == r.node
	switch phase := pvb.Status.Phase; {
	case isNew(phase):
		if pvb.Spec.Cancel {
			// No transfer has started anywhere: any node agent may end it.
			return ctrl.Result{}, r.end(ctx, req.Name, v1.PodVolumePhaseCanceled, "", nil)
		}
		if !mine {
			return ctrl.Result{}, nil
		}
		t, ok := r.transfers.reserve(backupKey(req.Name))
		if !ok {
			log.Debug("every transfer slot is taken: trying again later")
			return ctrl.Result{RequeueAfter: busyRetry}, nil
		}
		return ctrl.Result{}, r.start(ctx, &pvb, t, log)
	case phase == v1.PodVolumePhaseInProgress, phase == v1.PodVolumePhaseCanceling,
		phase == v1.PodVolumePhaseAccepted, phase == v1.PodVolumePhasePrepared:
		if !mine || !pvb.Spec.Cancel {
			return ctrl.Result{}, nil
		}
		if t := r.transfers.get(backupKey(req.Name)); t != nil {
			if _, err := update(ctx, r.client, r.reader, req.NamespacedName, &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
				if final(p.Status.Phase) || p.Status.Phase == v1.PodVolumePhaseCanceling {
					return false
				}
				p.Status.Phase = v1.PodVolumePhaseCanceling
				return true
			}); err != nil {
				return ctrl.Result{}, fmt.Errorf("marking PodVolumeBackup %s Canceling: %w", req.Name, err)
			}
			log.Info("cancelling the transfer")
			t.requestCancel()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.end(ctx, req.Name, v1.PodVolumePhaseCanceled, "", nil)
	}
	return ctrl.Result{}, nil
}

// start accepts the PodVolumeBackup, finds its volume and starts the
// transfer. Anything that fails before the transfer starts ends it Failed.
func (r *BackupReconciler) start(ctx context.Context, pvb *v1.PodVolumeBackup, t *transfer, log *slog.Logger) (err error) {
	key := backupKey(pvb.Name)
	started := false
	defer func() {
		if !started {
			r.transfers.release(key)
		}
	}()
	accepted, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvb), &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
		if !isNew(p.Status.Phase) || p.Spec.Cancel {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseAccepted
		p.Status.AcceptedTimestamp = r.stamp()
		return true
	})
	if err != nil || !accepted {
		return err
	}
	log.Info("accepted")
	_, path, err := r.volumePath(ctx, pvb.Spec.Pod.Namespace, pvb.Spec.Pod.Name, pvb.Spec.Volume)
	if err != nil {
		return r.end(ctx, pvb.Name, v1.PodVolumePhaseFailed, "error preparing the volume", err)
	}
	bsl, err := r.location(ctx, pvb.Spec.BackupStorageLocation)
	if err != nil {
		return r.end(ctx, pvb.Name, v1.PodVolumePhaseFailed, "error preparing the volume", err)
	}
	if _, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvb), &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
		if p.Status.Phase != v1.PodVolumePhaseAccepted {
			return false
		}
		p.Status.Phase = v1.PodVolumePhasePrepared
		return true
	}); err != nil {
		return err
	}
	var current v1.PodVolumeBackup
	inProgress, err := update(ctx, r.client, r.reader, client.ObjectKeyFromObject(pvb), &current, func(p *v1.PodVolumeBackup) bool {
		if p.Status.Phase != v1.PodVolumePhasePrepared || p.Spec.Cancel {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseInProgress
		p.Status.StartTimestamp = r.stamp()
		p.Status.Path = path
		return true
	})
	if err != nil {
		return err
	}
	if !inProgress {
		if current.Spec.Cancel && !final(current.Status.Phase) {
			return r.end(ctx, pvb.Name, v1.PodVolumePhaseCanceled, "", nil)
		}
		return nil
	}
	log.Info("transfer starts", "path", path)
	started = true
	pvbEnqueued.WithLabelValues(r.node).Inc()
	go r.run(t, current.DeepCopy(), path, bsl, log)
	return nil
}

// run is the transfer, in its own goroutine.
func (r *BackupReconciler) run(t *transfer, pvb *v1.PodVolumeBackup, path string, bsl *v1.BackupStorageLocation, log *slog.Logger) {
	key := backupKey(pvb.Name)
	defer r.transfers.release(key)
	ctx := t.start(r.base)
	defer t.done()
	progress := startProgress(r.client, pvb, r.progress, log)
	res, err := r.dataPath.Backup(ctx, podvolume.BackupRequest{
		Repository: podvolume.Repository{Location: bsl, VolumeNamespace: pvb.Spec.Pod.Namespace},
		Path:       path,
		Tags:       pvb.Spec.Tags,
		PVCName:    pvb.Annotations[v1.PVCNameAnnotation],
		Progress:   progress.set,
		// Velero's uploader settings (ParallelFilesUpload).
		UploaderSettings: pvb.Spec.UploaderSettings,
	})
	progress.stop()
	// The node agent may be stopping: the final write gets its own time.
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var werr error
	switch {
	case err == nil:
		if werr = r.complete(wctx, pvb.Name, res); werr == nil {
			observeCompleted(r.node, pvb, r.now())
		}
		log.Info("transfer completed", "snapshotID", res.SnapshotID, "bytes", res.TotalBytes)
	case t.wasCancelled():
		werr = r.end(wctx, pvb.Name, v1.PodVolumePhaseCanceled, "", nil)
		log.Info("transfer cancelled")
	case r.base.Err() != nil:
		werr = r.end(wctx, pvb.Name, v1.PodVolumePhaseFailed, "", fmt.Errorf("the node agent on node %s stopped during the transfer", r.node))
		log.Warn("transfer stopped with the node agent")
	default:
		p := progress.last()
		werr = r.endWith(wctx, pvb.Name, v1.PodVolumePhaseFailed, "data path backup failed", err, &p)
		log.Error("transfer failed", "error", err)
	}
	if werr != nil {
		log.Error("writing the transfer's outcome", "error", werr)
	}
}

func (r *BackupReconciler) complete(ctx context.Context, name string, res podvolume.BackupResult) error {
	_, err := update(ctx, r.client, r.reader, objectKey(r.namespace, name), &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
		if final(p.Status.Phase) {
			return false
		}
		p.Status.Phase = v1.PodVolumePhaseCompleted
		p.Status.SnapshotID = res.SnapshotID
		p.Status.CompletionTimestamp = r.stamp()
		p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: res.TotalBytes, BytesDone: res.TotalBytes}
		if res.Empty {
			p.Status.Message = "volume was empty so no snapshot was taken"
		}
		return true
	})
	return err
}

// end moves the PodVolumeBackup to a final phase, unless it is in one.
// The message is cause (if any) after what, as Velero words
// it ("what: cause").
func (r *BackupReconciler) end(ctx context.Context, name string, phase v1.PodVolumePhase, what string, cause error) error {
	return r.endWith(ctx, name, phase, what, cause, nil)
}

func (r *BackupReconciler) endWith(ctx context.Context, name string, phase v1.PodVolumePhase, what string, cause error, progress *podvolume.Progress) error {
	_, err := update(ctx, r.client, r.reader, objectKey(r.namespace, name), &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
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
		if progress != nil && *progress != (podvolume.Progress{}) {
			p.Status.Progress = v1.DataMoveOperationProgress{TotalBytes: progress.TotalBytes, BytesDone: progress.BytesDone}
		}
		return true
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func message(what string, cause error) string {
	switch {
	case cause == nil:
		return what
	case what == "":
		return cause.Error()
	}
	return what + ": " + cause.Error()
}

// SetupWithManager registers the reconciler.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("podvolumebackup").
		For(&v1.PodVolumeBackup{}).
		Complete(r)
}
