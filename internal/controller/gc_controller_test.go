package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// The garbage collector and the Backup finalizer against a real API server,
// with only the controller under test running. One cluster for all cases:
// starting one costs seconds.
func TestGCAndFinalizerAgainstAPIServer(t *testing.T) {
	h := startAPIHarness(t)
	t.Run("GC", h.testGC)
	t.Run("Finalizer", h.testFinalizer)
	t.Run("FinalizerOff", h.testFinalizerOff)
	t.Run("FinalizerBulkDeletions", h.testFinalizerBulkDeletions)
}

// startAPIHarness starts a local cluster for the test and a client of it.
func startAPIHarness(t *testing.T) *apiHarness {
	t.Helper()
	c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Log(err)
		}
	})
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &apiHarness{cfg: c.Config, scheme: scheme, c: cl}
}

type apiHarness struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	c      client.Client
	seq    int
}

func (h *apiHarness) name(prefix string) string {
	h.seq++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, h.seq)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (h *apiHarness) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := h.name(prefix)
	if err := h.c.Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// startManager runs the reconcilers setup registers, watching ns only, as
// the server does, until the test ends.
func (h *apiHarness) startManager(t *testing.T, ns string, setup func(mgr ctrl.Manager, locs *locations.Resolver) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(h.cfg, ctrl.Options{
		Scheme:                 h.scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	locs := &locations.Resolver{Client: mgr.GetClient(), SecretReader: mgr.GetAPIReader(), Namespace: ns, DefaultName: "default"}
	if err := setup(mgr, locs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func testLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (h *apiHarness) location(t *testing.T, ns, name string, mode v1.BackupStorageLocationAccessMode) *v1.BackupStorageLocation {
	t.Helper()
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			AccessMode:  mode,
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: name}},
		},
	}
	if err := h.c.Create(testCtx(t), bsl); err != nil {
		t.Fatal(err)
	}
	// As the location controller (not running here) would find it.
	orig := bsl.DeepCopy()
	bsl.Status.Phase = v1.BackupStorageLocationPhaseAvailable
	if err := h.c.Patch(testCtx(t), bsl, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return bsl
}

// finishedBackup creates a Backup and gives it the status a run would have
// left: phase and expiration.
func (h *apiHarness) finishedBackup(t *testing.T, ns, location string, phase v1.BackupPhase, expiration time.Time) *v1.Backup {
	t.Helper()
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}, Spec: v1.BackupSpec{StorageLocation: location}}
	if err := h.c.Create(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
	h.setStatus(t, b, func(s *v1.BackupStatus) {
		s.Phase = phase
		s.Expiration = ptr.To(metav1.NewTime(expiration))
	})
	return b
}

func (h *apiHarness) setStatus(t *testing.T, b *v1.Backup, change func(*v1.BackupStatus)) {
	t.Helper()
	orig := b.DeepCopy()
	change(&b.Status)
	if err := h.c.Patch(testCtx(t), b, client.MergeFrom(orig)); err != nil {
		t.Fatalf("setting status of backup %s: %v", b.Name, err)
	}
}

func (h *apiHarness) requests(t *testing.T, b *v1.Backup) []v1.DeleteBackupRequest {
	t.Helper()
	var list v1.DeleteBackupRequestList
	if err := h.c.List(testCtx(t), &list, client.InNamespace(b.Namespace),
		client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(b.Name), v1.BackupUIDLabel: string(b.UID)}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitRequest polls (every 50 ms) until b has a DeleteBackupRequest and
// returns it with the moment it was seen.
func (h *apiHarness) waitRequest(t *testing.T, b *v1.Backup, timeout time.Duration) (*v1.DeleteBackupRequest, time.Time) {
	t.Helper()
	var found *v1.DeleteBackupRequest
	var seen time.Time
	h.poll(t, timeout, fmt.Sprintf("a DeleteBackupRequest for backup %s", b.Name), func() bool {
		if items := h.requests(t, b); len(items) > 0 {
			found, seen = &items[0], time.Now()
			return true
		}
		return false
	})
	return found, seen
}

func (h *apiHarness) poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// noRequestFor checks that b gets no DeleteBackupRequest during d.
func (h *apiHarness) noRequestFor(t *testing.T, b *v1.Backup, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if items := h.requests(t, b); len(items) > 0 {
			t.Fatalf("backup %s got DeleteBackupRequest %s, want none yet", b.Name, items[0].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *apiHarness) backup(t *testing.T, b *v1.Backup) *v1.Backup {
	t.Helper()
	var got v1.Backup
	if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(b), &got); err != nil {
		t.Fatalf("reading backup %s: %v", b.Name, err)
	}
	return &got
}

func (h *apiHarness) waitLabel(t *testing.T, b *v1.Backup, want string) {
	t.Helper()
	h.poll(t, 10*time.Second, fmt.Sprintf("%s=%q on backup %s", v1.GCFailureLabel, want, b.Name), func() bool {
		return h.backup(t, b).Labels[v1.GCFailureLabel] == want
	})
}

// wholeSecondsAhead is a time d or up to a second more from now, on a whole
// second: expirations are stored with second precision.
func wholeSecondsAhead(d time.Duration) time.Time {
	return time.Now().Add(d).Truncate(time.Second).Add(time.Second)
}

func (h *apiHarness) testGC(t *testing.T) {
	ns := h.namespace(t, "gc")
	h.startManager(t, ns, func(mgr ctrl.Manager, locs *locations.Resolver) error {
		// Retries an hour away: what happens within a test is the work of
		// the expiration timer and of the location watch alone.
		return (&GCReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Locations: locs, Log: testLog(),
			BlockedRetry: time.Hour, DeletionRetry: time.Hour,
		}).SetupWithManager(mgr)
	})
	h.location(t, ns, "default", "")

	t.Run("expired backup gets one deletion request within seconds", func(t *testing.T) {
		expiration := wholeSecondsAhead(3 * time.Second)
		b := h.finishedBackup(t, ns, "default", v1.BackupPhaseCompleted, expiration)
		dbr, seen := h.waitRequest(t, b, 20*time.Second)
		late := seen.Sub(expiration)
		t.Logf("request %s seen %v after expiration", dbr.Name, late)
		if late > 5*time.Second {
			t.Errorf("deletion requested %v after expiration, want within seconds", late)
		}
		if dbr.CreationTimestamp.Time.Before(expiration) {
			t.Errorf("request created at %v, before the expiration %v", dbr.CreationTimestamp.Time, expiration)
		}
		if dbr.Spec.BackupName != b.Name || dbr.Labels[v1.BackupNameLabel] != b.Name || dbr.Labels[v1.BackupUIDLabel] != string(b.UID) {
			t.Errorf("request spec %+v labels %v, want backup %s (uid %s)", dbr.Spec, dbr.Labels, b.Name, b.UID)
		}
		if len(dbr.GenerateName) == 0 || dbr.GenerateName != b.Name+"-" {
			t.Errorf("request generateName %q, want %q", dbr.GenerateName, b.Name+"-")
		}
		// A change that wakes the controller again finds the pending
		// request and makes no second one.
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhasePartiallyFailed })
		time.Sleep(1500 * time.Millisecond)
		if n := len(h.requests(t, b)); n != 1 {
			t.Errorf("%d deletion requests, want 1", n)
		}
		if l, ok := h.backup(t, b).Labels[v1.GCFailureLabel]; ok {
			t.Errorf("backup labelled %s=%q", v1.GCFailureLabel, l)
		}
	})

	t.Run("expiration moved earlier is followed", func(t *testing.T) {
		b := h.finishedBackup(t, ns, "default", v1.BackupPhaseCompleted, time.Now().Add(720*time.Hour))
		expiration := wholeSecondsAhead(2 * time.Second)
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Expiration = ptr.To(metav1.NewTime(expiration)) })
		_, seen := h.waitRequest(t, b, 20*time.Second)
		if late := seen.Sub(expiration); late > 5*time.Second {
			t.Errorf("deletion requested %v after the new expiration", late)
		}
	})

	t.Run("running backup is collected when it ends", func(t *testing.T) {
		b := h.finishedBackup(t, ns, "default", v1.BackupPhaseInProgress, time.Now().Add(-time.Minute))
		h.noRequestFor(t, b, 2*time.Second)
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseWaitingForPluginOperations })
		h.noRequestFor(t, b, time.Second)
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted })
		h.waitRequest(t, b, 5*time.Second)
	})

	t.Run("backup being deleted is left to the deletion", func(t *testing.T) {
		b := h.finishedBackup(t, ns, "default", v1.BackupPhaseDeleting, time.Now().Add(-time.Minute))
		h.noRequestFor(t, b, 2*time.Second)
	})

	t.Run("read-only location holds the backup until it is writable", func(t *testing.T) {
		bsl := h.location(t, ns, h.name("ro"), v1.BackupStorageLocationAccessModeReadOnly)
		b := h.finishedBackup(t, ns, bsl.Name, v1.BackupPhaseCompleted, time.Now().Add(-time.Minute))
		h.waitLabel(t, b, GCFailureBSLReadOnly)
		h.noRequestFor(t, b, 2*time.Second)

		orig := bsl.DeepCopy()
		bsl.Spec.AccessMode = v1.BackupStorageLocationAccessModeReadWrite
		if err := h.c.Patch(testCtx(t), bsl, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		h.waitRequest(t, b, 5*time.Second)
		h.waitLabel(t, b, "")
	})

	t.Run("missing location holds the backup until it exists", func(t *testing.T) {
		name := h.name("later")
		b := h.finishedBackup(t, ns, name, v1.BackupPhaseCompleted, time.Now().Add(-time.Minute))
		h.waitLabel(t, b, GCFailureBSLNotFound)
		h.noRequestFor(t, b, time.Second)
		h.location(t, ns, name, "")
		h.waitRequest(t, b, 5*time.Second)
		h.waitLabel(t, b, "")
	})

	// The deletion's own rule: a request made for it now would only wait.
	t.Run("a location not checked yet holds the backup", func(t *testing.T) {
		bsl := h.location(t, ns, h.name("unchecked"), "")
		orig := bsl.DeepCopy()
		bsl.Status.Phase = ""
		if err := h.c.Patch(testCtx(t), bsl, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		b := h.finishedBackup(t, ns, bsl.Name, v1.BackupPhaseCompleted, time.Now().Add(-time.Minute))
		h.waitLabel(t, b, GCFailureBSLUnavailable)
		h.noRequestFor(t, b, time.Second)
	})

	t.Run("unavailable location holds the backup until it is available", func(t *testing.T) {
		bsl := h.location(t, ns, h.name("down"), "")
		setPhase := func(p v1.BackupStorageLocationPhase) {
			orig := bsl.DeepCopy()
			bsl.Status.Phase = p
			if err := h.c.Patch(testCtx(t), bsl, client.MergeFrom(orig)); err != nil {
				t.Fatal(err)
			}
		}
		setPhase(v1.BackupStorageLocationPhaseUnavailable)
		b := h.finishedBackup(t, ns, bsl.Name, v1.BackupPhaseCompleted, time.Now().Add(-time.Minute))
		h.waitLabel(t, b, GCFailureBSLUnavailable)
		h.noRequestFor(t, b, time.Second)
		setPhase(v1.BackupStorageLocationPhaseAvailable)
		h.waitRequest(t, b, 5*time.Second)
		h.waitLabel(t, b, "")
	})
}

func (h *apiHarness) testFinalizer(t *testing.T) {
	ns := h.namespace(t, "fin")
	h.startManager(t, ns, func(mgr ctrl.Manager, locs *locations.Resolver) error {
		// No Engine: the backups here name a location that does not exist,
		// so they end in FailedValidation before any engine would run.
		return (&BackupReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Locations: locs,
			DefaultTTL: time.Hour, AddFinalizer: true, Log: testLog(),
		}).SetupWithManager(mgr)
	})
	newBackup := func(t *testing.T) *v1.Backup {
		t.Helper()
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}, Spec: v1.BackupSpec{StorageLocation: "nowhere"}}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.poll(t, 10*time.Second, "finalizer and FailedValidation", func() bool {
			got := h.backup(t, b)
			return controllerutil.ContainsFinalizer(got, v1.BackupFinalizer) && got.Status.Phase == v1.BackupPhaseFailedValidation
		})
		return h.backup(t, b)
	}
	gone := func(t *testing.T, b *v1.Backup) {
		t.Helper()
		h.poll(t, 10*time.Second, "deletion of backup "+b.Name, func() bool {
			err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(b), &v1.Backup{})
			return apierrors.IsNotFound(err)
		})
	}
	removeFinalizer := func(t *testing.T, b *v1.Backup) {
		t.Helper()
		orig := b.DeepCopy()
		controllerutil.RemoveFinalizer(b, v1.BackupFinalizer)
		if err := h.c.Patch(testCtx(t), b, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("deleting a Backup requests its deletion and waits for the finalizer", func(t *testing.T) {
		b := newBackup(t)
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		dbr, _ := h.waitRequest(t, b, 10*time.Second)
		if dbr.Spec.BackupName != b.Name {
			t.Errorf("request for backup %q, want %q", dbr.Spec.BackupName, b.Name)
		}
		time.Sleep(time.Second)
		got := h.backup(t, b)
		if got.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(got, v1.BackupFinalizer) {
			t.Fatalf("backup: deletionTimestamp %v finalizers %v, want it kept by %s until the deletion removes it", got.DeletionTimestamp, got.Finalizers, v1.BackupFinalizer)
		}
		if n := len(h.requests(t, b)); n != 1 {
			t.Errorf("%d deletion requests, want 1", n)
		}
		// What the deletion controller does last.
		removeFinalizer(t, got)
		gone(t, b)
	})

	t.Run("deleting a Backup left InProgress fails it, then requests its deletion", func(t *testing.T) {
		b := newBackup(t)
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseInProgress })
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.waitRequest(t, b, 10*time.Second)
		got := h.backup(t, b)
		if got.Status.Phase != v1.BackupPhaseFailed {
			t.Errorf("phase %q, want Failed: the deletion would wait forever for a run nobody does", got.Status.Phase)
		}
		removeFinalizer(t, got)
		gone(t, b)
	})

	t.Run("deleting a Backup waiting for plugin operations requests its deletion once they end", func(t *testing.T) {
		b := newBackup(t)
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseWaitingForPluginOperations })
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.noRequestFor(t, b, 2*time.Second)
		got := h.backup(t, b)
		h.setStatus(t, got, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted })
		h.waitRequest(t, b, waitForOperationsBeforeDeletion+5*time.Second)
		removeFinalizer(t, h.backup(t, b))
		gone(t, b)
	})

	t.Run("Backup without the finalizer is left alone", func(t *testing.T) {
		b := newBackup(t)
		removeFinalizer(t, b)
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		gone(t, b)
		h.noRequestFor(t, b, time.Second)
	})

	t.Run("synced backup gets the finalizer and is not run", func(t *testing.T) {
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("synced"),
			Annotations: map[string]string{v1.SyncedAnnotation: "elsewhere"}}, Spec: v1.BackupSpec{StorageLocation: "nowhere"}}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.poll(t, 10*time.Second, "finalizer on a synced backup", func() bool {
			return slices.Contains(h.backup(t, b).Finalizers, v1.BackupFinalizer)
		})
		time.Sleep(500 * time.Millisecond)
		if p := h.backup(t, b).Status.Phase; p != "" {
			t.Errorf("synced backup went to phase %q; its status is the sync's to write", p)
		}
		removeFinalizer(t, h.backup(t, b))
	})
}

// startFinalizingBackups runs a backup controller with the finalizer on
// (or off) for ns and returns a function making Backups that have reached
// FailedValidation, with the finalizer when it is on.
func (h *apiHarness) startFinalizingBackups(t *testing.T, ns string, on bool) func(t *testing.T, change func(*v1.Backup)) *v1.Backup {
	h.startManager(t, ns, func(mgr ctrl.Manager, locs *locations.Resolver) error {
		return (&BackupReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Locations: locs,
			DefaultTTL: time.Hour, AddFinalizer: on, Log: testLog(),
		}).SetupWithManager(mgr)
	})
	return func(t *testing.T, change func(*v1.Backup)) *v1.Backup {
		t.Helper()
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}, Spec: v1.BackupSpec{StorageLocation: "nowhere"}}
		if change != nil {
			change(b)
		}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.poll(t, 10*time.Second, "FailedValidation", func() bool {
			got := h.backup(t, b)
			return controllerutil.ContainsFinalizer(got, v1.BackupFinalizer) == on && got.Status.Phase == v1.BackupPhaseFailedValidation
		})
		return h.backup(t, b)
	}
}

// goneWithoutRequest waits until b is gone and checks nobody asked for the
// deletion of its data.
func (h *apiHarness) goneWithoutRequest(t *testing.T, b *v1.Backup) {
	t.Helper()
	h.poll(t, 10*time.Second, "backup "+b.Name+" to go", func() bool {
		return apierrors.IsNotFound(h.c.Get(testCtx(t), client.ObjectKeyFromObject(b), &v1.Backup{}))
	})
	h.noRequestFor(t, b, time.Second)
}

// Off (the default), deleting a Backup object means what it means in
// Velero: the object goes, the data stays. A finalizer an earlier server
// added is taken off.
func (h *apiHarness) testFinalizerOff(t *testing.T) {
	ns := h.namespace(t, "finoff")
	newBackup := h.startFinalizingBackups(t, ns, false)

	t.Run("no finalizer is added, and deleting the object requests nothing", func(t *testing.T) {
		b := newBackup(t, nil)
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.goneWithoutRequest(t, b)
	})
	t.Run("a finalizer added earlier is taken off", func(t *testing.T) {
		b := newBackup(t, func(b *v1.Backup) { b.Finalizers = []string{v1.BackupFinalizer} })
		if controllerutil.ContainsFinalizer(b, v1.BackupFinalizer) {
			t.Fatalf("finalizers %v", b.Finalizers)
		}
	})
	t.Run("a Backup deleted while it still had the finalizer loses it, and only the object goes", func(t *testing.T) {
		b := newBackup(t, nil)
		// As an earlier server with the finalizer on would have left it,
		// then deleted before this one took it off.
		orig := b.DeepCopy()
		controllerutil.AddFinalizer(b, v1.BackupFinalizer)
		if err := h.c.Patch(testCtx(t), b, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.goneWithoutRequest(t, b)
	})
}

// On, a Backup deleted because something else is being deleted loses the
// finalizer and nothing else: deleting a namespace, the CRD or an owner
// must not delete backup data.
func (h *apiHarness) testFinalizerBulkDeletions(t *testing.T) {
	t.Run("namespace deletion", func(t *testing.T) {
		ns := h.namespace(t, "finns")
		newBackup := h.startFinalizingBackups(t, ns, true)
		b := newBackup(t, nil)
		if err := h.c.Delete(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		// What the namespace controller does (none runs here).
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.goneWithoutRequest(t, b)
	})

	ns := h.namespace(t, "finbulk")
	newBackup := h.startFinalizingBackups(t, ns, true)
	owned := func(t *testing.T) (*v1.Backup, *v1.Schedule) {
		t.Helper()
		sched := &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("sched")}, Spec: v1.ScheduleSpec{Schedule: "@daily"}}
		if err := h.c.Create(testCtx(t), sched); err != nil {
			t.Fatal(err)
		}
		b := newBackup(t, func(b *v1.Backup) {
			b.OwnerReferences = []metav1.OwnerReference{{APIVersion: "velero.io/v1", Kind: "Schedule", Name: sched.Name, UID: sched.UID}}
		})
		return b, sched
	}
	t.Run("an owner that stays: the Backup itself was deleted, and its data goes", func(t *testing.T) {
		b, _ := owned(t)
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.waitRequest(t, b, 10*time.Second)
		got := h.backup(t, b)
		orig := got.DeepCopy()
		controllerutil.RemoveFinalizer(got, v1.BackupFinalizer)
		if err := h.c.Patch(testCtx(t), got, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("garbage collection after the owner was deleted", func(t *testing.T) {
		b, sched := owned(t)
		if err := h.c.Delete(testCtx(t), sched); err != nil {
			t.Fatal(err)
		}
		// What the garbage collector does (none runs here).
		if err := h.c.Delete(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.goneWithoutRequest(t, b)
	})
	// Last: the CRD does not come back for the tests that would follow.
	t.Run("removal of the Backup CRD", func(t *testing.T) {
		b := newBackup(t, nil)
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "backups.velero.io"}}
		if err := h.c.Delete(testCtx(t), crd); err != nil {
			t.Fatal(err)
		}
		// The API server deletes every Backup itself before the CRD goes.
		h.poll(t, 30*time.Second, "the Backup CRD to go", func() bool {
			return apierrors.IsNotFound(h.c.Get(testCtx(t), client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}))
		})
		if n := len(h.requests(t, b)); n != 0 {
			t.Errorf("%d deletion requests for backup %s, want none", n, b.Name)
		}
	})
}
