package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
// It works whether or not the kind's CRD has a status subresource (see
// patchStatusOnly): Velero's CRDs, and Lifeboat's, have none, but a
// cluster may still have CRDs an older Lifeboat installed with one.
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
// it may run more than once, each time on a fresh copy. Only the status is
// written; whatever else change alters in obj is not sent, and obj ends as
// it is stored. A status must be written even while the server stops (how
// a run ended, its last checkpoint), so a cancelled ctx gets a short one of
// its own.
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
		err := call(func(ctx context.Context) error { return patchStatusOnly(ctx, c, orig, obj) })
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

// patchStatusOnly writes the difference between orig's status and obj's as
// a JSON merge patch holding nothing but that difference and orig's
// resourceVersion (the precondition), and leaves obj as the API server
// stored it; on an error obj is as it was.
//
// Whether the kind has a status subresource is learned from the API server
// on every write rather than remembered, so a CRD replaced while the server
// runs (`velero install` after `lifeboat install`, or the reverse) is
// followed at once, with no watch on CRDs and nothing cached to go stale.
// The patch goes to the main resource first: with no status subresource
// (Velero's CRDs and Lifeboat's), that is where status is written, in one
// request. With one, the main resource ignores status, so the object comes
// back with orig's status unchanged; the same patch then goes to the status
// subresource, with the resourceVersion the first answer carries (the
// first write changed nothing that another writer could have made stale).
// A status that came back unchanged may also mean the schema pruned every
// field the write changed (Lifeboat's own fields, under Velero's CRDs):
// then the status subresource is not there (NotFound) and nothing more is
// to be written. The other way round, /status first, is ambiguous: the API
// server answers NotFound both for a missing object and for a CRD without
// the subresource.
//
// The patch never carries spec or metadata, so on the main resource too it
// cannot undo another writer's change to them; the resourceVersion
// precondition refuses it after any change at all.
func patchStatusOnly(ctx context.Context, c client.Client, orig, obj client.Object) error {
	want := obj.DeepCopyObject().(client.Object)
	patch, changed, err := statusMergePatch(orig, want, orig.GetResourceVersion())
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		copyInto(obj, want)
		return err
	}
	if !changed {
		return nil
	}
	unchanged, err := sameStatus(orig, obj)
	if err != nil || !unchanged {
		return err
	}
	patch, _, err = statusMergePatch(orig, want, obj.GetResourceVersion())
	if err != nil {
		return err
	}
	written := want.DeepCopyObject().(client.Object)
	err = c.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err):
		// No status subresource: what the main resource kept is all the
		// schema keeps.
		return nil
	case err != nil:
		copyInto(obj, want)
		return err
	}
	copyInto(obj, written)
	return nil
}

// statusMergePatch is the JSON merge patch from orig's status to want's,
// with resourceVersion as the precondition; changed says whether the status
// differs at all.
func statusMergePatch(orig, want client.Object, resourceVersion string) (patch []byte, changed bool, err error) {
	from, err := statusJSON(orig)
	if err != nil {
		return nil, false, err
	}
	to, err := statusJSON(want)
	if err != nil {
		return nil, false, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, false, fmt.Errorf("computing the status patch of %s: %w", orig.GetName(), err)
	}
	var body map[string]any
	if err := json.Unmarshal(diff, &body); err != nil {
		return nil, false, fmt.Errorf("computing the status patch of %s: %w", orig.GetName(), err)
	}
	changed = len(body) > 0
	body["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	patch, err = json.Marshal(body)
	return patch, changed, err
}

// statusJSON is obj with nothing but its status, as JSON.
func statusJSON(obj client.Object) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	out := map[string]any{}
	if s, ok := u["status"]; ok && s != nil {
		out["status"] = s
	}
	return json.Marshal(out)
}

// sameStatus reports whether a and b have the same status, in their JSON
// form.
func sameStatus(a, b client.Object) (bool, error) {
	ja, err := statusJSON(a)
	if err != nil {
		return false, err
	}
	jb, err := statusJSON(b)
	if err != nil {
		return false, err
	}
	var ua, ub any
	if err := json.Unmarshal(ja, &ua); err != nil {
		return false, err
	}
	if err := json.Unmarshal(jb, &ub); err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(ua, ub), nil
}

// copyInto sets dst to src, two objects of the same type.
func copyInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
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
// Status is writeStatus's alone: with no status subresource the main
// resource would take it, so whatever change alters there is not sent.
func patchObject(ctx context.Context, c client.Client, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	data, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj)
	if err != nil {
		return fmt.Errorf("computing the patch of %s: %w", obj.GetName(), err)
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		return fmt.Errorf("computing the patch of %s: %w", obj.GetName(), err)
	}
	delete(body, "status")
	if data, err = json.Marshal(body); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, statusWriteTimeout)
	defer cancel()
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}
