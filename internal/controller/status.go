package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// statusWriteTimeout bounds one status write (or the read after a
	// conflict).
	statusWriteTimeout = 30 * time.Second
	// shutdownWriteTimeout bounds a status write made after the server
	// began to stop.
	shutdownWriteTimeout = 10 * time.Second
	// statusWriteRetries bounds the fresh reads after conflicts caused by
	// metadata writes only; a label written that often is a bug elsewhere.
	statusWriteRetries = 5
)

// writeStatus applies change to obj and writes obj's status, with the
// resourceVersion obj was read at as a precondition. It is the one way the
// controllers record a phase transition, a run's outcome or a checkpoint,
// so that a write made on what was read can never undo what another
// writer (a second server, or this one through a stale read) wrote since.
//
// A conflict means the object changed after it was read. When only its
// metadata changed (a label, a finalizer, the deletion timestamp), the
// decision still holds: obj is read again through reader, change is
// applied to the fresh copy and written. When its spec or status changed,
// the decision was made on what is no longer there; the conflict is
// returned (apierrors.IsConflict holds) and obj is left as it was read, so
// that later writes through it are refused too, and the reconcile that
// gets the error runs again on what is there now. A nil reader refuses every
// conflict.
//
// change must set the whole transition from obj (conditions included):
// it may run more than once, each time on a fresh copy. A status must be
// written even while the server stops (how a run ended, its last
// checkpoint), so a cancelled ctx gets a short one of its own.
func writeStatus[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, reader client.Reader, obj PT, change func()) error {
	timeout := statusWriteTimeout
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
		timeout = shutdownWriteTimeout
	}
	call := func(fn func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return fn(ctx)
	}
	for retry := 0; ; retry++ {
		orig := obj.DeepCopyObject().(PT)
		change()
		err := call(func(ctx context.Context) error {
			return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
		if !apierrors.IsConflict(err) || reader == nil {
			return err
		}
		if retry == statusWriteRetries {
			return fmt.Errorf("gave up after %d conflicts in a row: %w", retry+1, err)
		}
		var fresh T
		if err := call(func(ctx context.Context) error { return reader.Get(ctx, client.ObjectKeyFromObject(obj), PT(&fresh)) }); err != nil {
			return fmt.Errorf("reading it again after a conflicting write: %w", err)
		}
		same, cerr := sameButMetadata(orig, PT(&fresh))
		if cerr != nil {
			return cerr
		}
		if !same {
			*obj = *orig
			return fmt.Errorf("its spec or status changed since it was read (another server, or a stale read), so this write would undo that change; not writing: %w", err)
		}
		*obj = fresh
	}
}

// sameButMetadata reports whether a and b agree in everything but their
// metadata, in their JSON form (what the API server stores).
func sameButMetadata(a, b client.Object) (bool, error) {
	ua, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		return false, fmt.Errorf("comparing %s with its stored copy: %w", a.GetName(), err)
	}
	ub, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return false, fmt.Errorf("comparing %s with its stored copy: %w", b.GetName(), err)
	}
	for _, k := range []string{"metadata", "apiVersion", "kind"} {
		delete(ua, k)
		delete(ub, k)
	}
	return equality.Semantic.DeepEqual(ua, ub), nil
}

// patchObject applies change to obj's metadata or spec and patches it, with
// the resourceVersion obj was read at as a precondition: what a controller
// records as it takes an object on (a finalizer, the location a backup
// goes to, the backup a restore reads) never overwrites what another writer
// recorded since. A conflict is returned for the reconcile to run again.
func patchObject(ctx context.Context, c client.Client, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	ctx, cancel := context.WithTimeout(ctx, statusWriteTimeout)
	defer cancel()
	return c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}
