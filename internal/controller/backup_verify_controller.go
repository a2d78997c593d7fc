package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/snapshotcheck"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// verifyTimeout bounds one verification: reading a whole backup back,
// minutes for the largest.
const verifyTimeout = time.Hour

// BackupVerifyReconciler answers the verification requests on Backups
// (v1.VerifyRequestAnnotation, set by `lifeboat backup verify` or, for the
// backups of a Schedule annotated v1.VerifyBackupsAnnotation, by the
// schedule): it checks every stored file and tarball entry against the
// digests the backup wrote (internal/integrity) and records the outcome as
// the Verified condition and v1.VerificationAnnotation, then marks the
// request answered (v1.VerifiedRequestAnnotation). A request on a backup
// still running is answered once the backup ends.
type BackupVerifyReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Locations *locations.Resolver
	// Limits bound what a tarball may unpack to, as for restores.
	Limits archive.Limits
	// Snapshots looks the backup's CSI snapshots up; nil checks none.
	Snapshots *snapshotcheck.CSI
	Log       *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// verifyPending says whether o carries a request not answered yet.
func verifyPending(o client.Object) bool {
	a := o.GetAnnotations()
	return a[v1.VerifyRequestAnnotation] != "" && a[v1.VerifyRequestAnnotation] != a[v1.VerifiedRequestAnnotation]
}

// SetupWithManager registers the reconciler. One verification at a time:
// each reads a whole backup from its store.
func (r *BackupVerifyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Backup{}, builder.WithPredicates(predicate.NewPredicateFuncs(verifyPending))).
		// A verification's dry run ending answers the verification.
		Watches(&v1.Restore{}, handler.EnqueueRequestsFromMapFunc(verificationOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("backupverify").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupVerifyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1.Backup
	if err := r.reader().Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !verifyPending(&b) || b.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if !b.Status.Phase.IsTerminal() {
		// Its end is an update, which brings it back here.
		return ctrl.Result{}, nil
	}
	schedule := b.Labels[v1.ScheduleNameLabel]
	token := b.Annotations[v1.VerifyRequestAnnotation]
	reason, summary, checked := integrityAnswered(&b, token)
	if !checked {
		vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
		var err error
		reason, summary, err = r.verify(vctx, &b)
		cancel()
		if err != nil {
			metrics.BackupVerified(schedule, v1.VerificationError)
			return ctrl.Result{}, fmt.Errorf("verifying backup %s: %w", req, err)
		}
	}
	if want, ok := b.Annotations[v1.VerifyDryRunAnnotation]; ok && reason != v1.VerificationDiffers && reason != v1.VerificationNotStored {
		mapping, err := parseVerifyMapping(want)
		if err != nil {
			reason, summary = v1.VerificationError, err.Error()
		} else {
			if !checked {
				// The dry run takes a while: the check is not read twice.
				if err := patchObject(ctx, r.Client, &b, func() {
					b.Annotations[v1.VerifyIntegrityAnnotation] = token + " " + reason + ": " + summary
				}); err != nil {
					return ctrl.Result{}, fmt.Errorf("recording the integrity check of backup %s: %w", req, err)
				}
			}
			rs, err := r.dryRun(ctx, &b, token, mapping)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !restoreEnded(rs.Status.Phase) {
				return ctrl.Result{RequeueAfter: dryRunPoll}, nil
			}
			reason, summary = withDryRun(reason, summary, rs)
		}
	}
	metrics.BackupVerified(schedule, reason)
	r.Log.Info("backup verified", "backup", req.String(), "result", reason, "summary", summary)
	now := r.now().UTC().Format(time.RFC3339)
	if err := writeStatus(ctx, r.Client, r.APIReader, &b, func() {
		setCondition(&b.Status.Conditions, b.Generation, v1.BackupConditionVerified, reason == v1.VerificationVerified, reason, now+": "+summary)
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("recording the verification of backup %s: %w", req, err)
	}
	// Last: a client that sees its request answered finds the outcome.
	if err := patchObject(ctx, r.Client, &b, func() {
		b.Annotations[v1.VerificationAnnotation] = fmt.Sprintf("%s %s: %s", now, reason, summary)
		b.Annotations[v1.VerifiedRequestAnnotation] = token
		delete(b.Annotations, v1.VerifyIntegrityAnnotation)
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("recording the verification of backup %s: %w", req, err)
	}
	return ctrl.Result{}, nil
}

// dryRunPoll is how often a verification looks at its dry run besides
// the Restore's own events (verificationOf), in case one is missed.
const dryRunPoll = 30 * time.Second

// verificationOf maps a verification's dry-run Restore to its Backup.
func verificationOf(_ context.Context, o client.Object) []reconcile.Request {
	rs, ok := o.(*v1.Restore)
	if !ok || rs.Annotations[v1.VerifyRestoreAnnotation] == "" || !restoreEnded(rs.Status.Phase) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rs.Namespace, Name: rs.Spec.BackupName}}}
}

// integrityAnswered returns the integrity check recorded for the request
// token, when there is one.
func integrityAnswered(b *v1.Backup, token string) (reason, summary string, ok bool) {
	tok, rest, found := strings.Cut(b.Annotations[v1.VerifyIntegrityAnnotation], " ")
	if !found || tok != token {
		return "", "", false
	}
	reason, summary, found = strings.Cut(rest, ": ")
	return reason, summary, found
}

// parseVerifyMapping reads VerifyDryRunAnnotation: "true" (no mapping) or
// "src:dst,...".
func parseVerifyMapping(v string) (map[string]string, error) {
	if v == "true" {
		return nil, nil
	}
	fix := fmt.Errorf("annotation %s is %q: set it to \"true\" (a dry run into the backup's own namespaces) or to a namespace mapping such as \"shop:shop-check,db:db-check\"", v1.VerifyDryRunAnnotation, v)
	if v == "" {
		return nil, fix
	}
	mapping := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		src, dst, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || len(validation.IsDNS1123Label(src)) > 0 || len(validation.IsDNS1123Label(dst)) > 0 {
			return nil, fix
		}
		if _, dup := mapping[src]; dup {
			return nil, fix
		}
		mapping[src] = dst
	}
	return mapping, nil
}

// dryRun returns the dry-run Restore of this request, creating it the
// first time: its name is the backup's and the token's, so a retried
// reconcile finds the one it made.
func (r *BackupVerifyReconciler) dryRun(ctx context.Context, b *v1.Backup, token string, mapping map[string]string) (*v1.Restore, error) {
	sum := sha256.Sum256([]byte(token))
	base := b.Name
	if len(base) > 200 {
		base = base[:200]
	}
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: base + "-verify-" + hex.EncodeToString(sum[:4])}}
	err := r.reader().Get(ctx, client.ObjectKeyFromObject(rs), rs)
	if err == nil {
		return rs, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the dry run of backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	rs.Labels = map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name)}
	rs.Annotations = map[string]string{v1.VerifyRestoreAnnotation: token}
	rs.Spec = v1.RestoreSpec{BackupName: b.Name, DryRun: true, NamespaceMapping: mapping}
	cctx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	defer cancel()
	if err := r.Client.Create(cctx, rs); err != nil {
		return nil, fmt.Errorf("creating the dry run of backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	if !rs.Spec.DryRun {
		// Velero's Restore CRD prunes the field: what was just created is
		// a real restore. Take it back before a server runs it.
		_ = r.Client.Delete(cctx, rs)
		return nil, fmt.Errorf("the Restore CRD of this cluster drops spec.dryRun (it is Velero's): run `lifeboat install --crds-only`")
	}
	r.Log.Info("restore dry run started for a verification", "backup", b.Namespace+"/"+b.Name, "restore", rs.Name)
	return rs, nil
}

func restoreEnded(p v1.RestorePhase) bool {
	switch p {
	case v1.RestorePhaseCompleted, v1.RestorePhasePartiallyFailed, v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
		return true
	}
	return false
}

// withDryRun adds a dry run's outcome to the integrity check's.
func withDryRun(reason, summary string, rs *v1.Restore) (string, string) {
	prefix := summary + "; restore dry run " + rs.Name
	dr := rs.Status.DryRun
	switch {
	case rs.Status.Phase == v1.RestorePhaseFailedValidation:
		return v1.VerificationRestoreWouldFail, prefix + " failed validation: " + strings.Join(rs.Status.ValidationErrors, "; ")
	case rs.Status.Phase == v1.RestorePhaseFailed || dr == nil:
		return v1.VerificationRestoreWouldFail, prefix + " failed: " + rs.Status.FailureReason
	}
	counts := fmt.Sprintf(": %d would be created (%d not checked), %d updated, %d skipped, %d fail", dr.WouldCreate, dr.Unchecked, dr.WouldUpdate, dr.WouldSkip, dr.WouldFail)
	if dr.WouldFail == 0 {
		return reason, prefix + counts
	}
	for _, it := range dr.Items {
		if it.Outcome == v1.DryRunFail {
			item := it.Resource + " " + it.Name
			if it.Namespace != "" {
				item = it.Resource + " " + it.Namespace + "/" + it.Name
			}
			counts += fmt.Sprintf(" (first: %s: %s)", item, it.Message)
			break
		}
	}
	return v1.VerificationRestoreWouldFail, prefix + counts
}

// verify checks b's stored files; the error is for a store that could not
// be read, which is retried rather than answered.
func (r *BackupVerifyReconciler) verify(ctx context.Context, b *v1.Backup) (reason, summary string, err error) {
	if b.Status.Phase == v1.BackupPhaseFailed || b.Status.Phase == v1.BackupPhaseFailedValidation {
		return v1.VerificationNotStored, fmt.Sprintf("the backup ended %s: it stored no backup to verify", b.Status.Phase), nil
	}
	bsl, err := r.Locations.Find(ctx, b.Spec.StorageLocation)
	if err != nil {
		return "", "", err
	}
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return "", "", err
	}
	rep, err := integrity.Check(ctx, store, b.Name, b.Annotations[v1.DigestsAnnotation], r.Limits)
	if err != nil {
		return "", "", err
	}
	switch {
	case rep.NoDigests:
		reason, summary = v1.VerificationNoDigests, rep.Summary()
	case rep.Verified():
		reason, summary = v1.VerificationVerified, rep.Summary()
	default:
		return v1.VerificationDiffers, rep.Summary(), nil
	}
	snaps, missing, err := r.checkSnapshots(ctx, store, b)
	if err != nil {
		return "", "", err
	}
	if snaps != "" {
		summary += "; " + snaps
	}
	if missing {
		reason = v1.VerificationSnapshotsMissing
	}
	return reason, summary, nil
}

// checkSnapshots looks up the backup's CSI snapshots and counts the
// native ones, which cannot be looked up. It says what it found in one
// phrase ("" when the backup has no snapshots), and whether any is gone.
func (r *BackupVerifyReconciler) checkSnapshots(ctx context.Context, store *storage.BackupStore, b *v1.Backup) (string, bool, error) {
	// The files were just read whole by the integrity check: one that
	// cannot be decoded now is what the backup holds, said in the
	// summary, not retried. The volume information names the snapshots
	// (Velero 1.13 on, and Lifeboat); older backups have the two lists.
	var phrases []string
	var stored []unstructured.Unstructured
	native := 0
	infos, err := volumefiles.GetVolumeInfo(ctx, store, b.Name)
	if err != nil {
		phrases = append(phrases, fmt.Sprintf("volume information unreadable: %v", err))
	}
	for _, in := range infos {
		switch {
		case in.BackupMethod == volumefiles.NativeSnapshot:
			native++
		case in.BackupMethod == volumefiles.CSISnapshot && !in.SnapshotDataMoved && in.CSISnapshotInfo != nil:
			ci := in.CSISnapshotInfo
			stored = append(stored, unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
				"metadata": map[string]any{"name": ci.VSCName},
				"spec":     map[string]any{"driver": ci.Driver},
				"status":   map[string]any{"snapshotHandle": ci.SnapshotHandle},
			}})
		}
	}
	if infos == nil && err == nil {
		var nativeList []json.RawMessage
		if err := store.GetGzipJSON(ctx, store.BackupKey(b.Name, storage.BackupVolumeSnapshotsFile(b.Name)), &nativeList); err != nil && !errors.Is(err, storage.ErrNotFound) {
			phrases = append(phrases, fmt.Sprintf("native snapshots file unreadable: %v", err))
		}
		native = len(nativeList)
		var raw []map[string]any
		if err := store.GetGzipJSON(ctx, store.BackupKey(b.Name, storage.CSIVolumeSnapshotContentsFile(b.Name)), &raw); err != nil && !errors.Is(err, storage.ErrNotFound) {
			phrases = append(phrases, fmt.Sprintf("CSI snapshots file unreadable: %v", err))
		}
		for _, m := range raw {
			stored = append(stored, unstructured.Unstructured{Object: m})
		}
	}
	if native > 0 {
		phrases = append(phrases, fmt.Sprintf("%d native snapshots not looked up (Velero's VolumeSnapshotter API has no call for it)", native))
	}
	missing := false
	switch {
	case len(stored) == 0:
	case r.Snapshots == nil:
		phrases = append(phrases, fmt.Sprintf("%d CSI snapshots not looked up", len(stored)))
	default:
		results, err := r.Snapshots.Check(ctx, string(b.UID), stored)
		if errors.Is(err, snapshotcheck.ErrNoCSI) {
			phrases = append(phrases, fmt.Sprintf("%d CSI snapshots not looked up: %v", len(stored), err))
			break
		}
		if err != nil {
			return "", false, err
		}
		var present, gone, unknown []string
		for _, res := range results {
			what := res.Handle + " (content " + res.Content + ")"
			switch res.State {
			case snapshotcheck.Present:
				present = append(present, what)
			case snapshotcheck.Missing:
				gone = append(gone, what+": "+res.Message)
			default:
				unknown = append(unknown, what+": "+res.Message)
			}
		}
		phrase := fmt.Sprintf("CSI snapshots: %d of %d found", len(present), len(results))
		if len(gone) > 0 {
			missing = true
			phrase += fmt.Sprintf(", missing: %s", strings.Join(first(gone, 3), "; "))
		}
		if len(unknown) > 0 {
			phrase += fmt.Sprintf(", not looked up: %s", strings.Join(first(unknown, 3), "; "))
		}
		phrases = append(phrases, phrase)
	}
	return strings.Join(phrases, "; "), missing, nil
}

// first is at most n of list, saying how many more there are.
func first(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(list[:n:n], fmt.Sprintf("and %d more", len(list)-n))
}

func (r *BackupVerifyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reader reads around the cache, each call bounded by cluster.CallTimeout.
func (r *BackupVerifyReconciler) reader() client.Reader {
	return cluster.TimedReader{Reader: r.APIReader}
}
