package pluginhost

import (
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// The types below put each kind's methods through handle.do (or run), under
// their names in retryAfterCrash, so that every call gets the rules of
// failed calls. They hold no state of their own.

type objectStore struct{ *handle[api.ObjectStore] }

func (o objectStore) Init(config map[string]string) error {
	return o.setInit(config, func(p api.ObjectStore) error { return p.Init(config) })
}

func (o objectStore) PutObject(bucket, key string, body io.Reader) error {
	return o.do("PutObject", func(p api.ObjectStore) error { return p.PutObject(bucket, key, body) })
}

func (o objectStore) ObjectExists(bucket, key string) (ok bool, err error) {
	err = o.do("ObjectExists", func(p api.ObjectStore) (e error) { ok, e = p.ObjectExists(bucket, key); return })
	return
}

// GetObject's body keeps its process in use, and under the rules of failed
// calls, until it is read to the end or closed.
func (o objectStore) GetObject(bucket, key string) (rc io.ReadCloser, err error) {
	err = o.run("GetObject", func(p api.ObjectStore, proc *process) (bool, error) {
		body, err := p.GetObject(bucket, key)
		if err != nil {
			return false, err
		}
		rc = &download{body: body, done: func(err error) error {
			o.h.release(proc)
			if err == nil {
				return nil
			}
			_, err = o.failed("GetObject", proc, err, answering)
			return err
		}}
		return true, nil
	})
	return
}

// download is the body of a GetObject: done runs once, when the body ends
// (err nil at EOF or on Close) or fails.
type download struct {
	body   io.ReadCloser
	once   sync.Once
	done   func(error) error
	err    error
	closed atomic.Bool
}

func (d *download) Read(b []byte) (int, error) {
	if d.closed.Load() {
		return 0, fs.ErrClosed
	}
	n, err := d.body.Read(b)
	switch {
	case err == io.EOF:
		_ = d.finish(nil) // nil in, nil out
	case err != nil:
		return n, d.finish(err)
	}
	return n, err
}

// Close finishes before it closes: a Read that the close cuts short is
// then not taken for a crash of the plugin.
func (d *download) Close() error {
	d.closed.Store(true)
	_ = d.finish(nil) // nil in, nil out
	return d.body.Close()
}

// finish runs done once and returns err as done explained it, or as it is
// when done already ran.
func (d *download) finish(err error) error {
	d.once.Do(func() { d.err = d.done(err) })
	if err != nil && d.err != nil {
		return d.err
	}
	return err
}

func (o objectStore) ListCommonPrefixes(bucket, prefix, delimiter string) (out []string, err error) {
	err = o.do("ListCommonPrefixes", func(p api.ObjectStore) (e error) { out, e = p.ListCommonPrefixes(bucket, prefix, delimiter); return })
	return
}

func (o objectStore) ListObjects(bucket, prefix string) (out []string, err error) {
	err = o.do("ListObjects", func(p api.ObjectStore) (e error) { out, e = p.ListObjects(bucket, prefix); return })
	return
}

func (o objectStore) DeleteObject(bucket, key string) error {
	return o.do("DeleteObject", func(p api.ObjectStore) error { return p.DeleteObject(bucket, key) })
}

func (o objectStore) CreateSignedURL(bucket, key string, ttl time.Duration) (url string, err error) {
	err = o.do("CreateSignedURL", func(p api.ObjectStore) (e error) { url, e = p.CreateSignedURL(bucket, key, ttl); return })
	return
}

type deleteItemAction struct{ *handle[api.DeleteItemAction] }

func (d deleteItemAction) AppliesTo() (sel api.ResourceSelector, err error) {
	err = d.do("AppliesTo", func(p api.DeleteItemAction) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (d deleteItemAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	return d.do("Execute", func(p api.DeleteItemAction) error { return p.Execute(in) })
}

// Streaming reports whether the plugin's current process takes Execute
// calls over Lifeboat's stream (it has answered one there): the deletion
// engine then keeps many more calls in flight than it would unary ones.
func (d deleteItemAction) Streaming() bool {
	impl, p, err := d.acquire()
	if err != nil {
		return false
	}
	defer d.h.release(p)
	s, ok := any(impl).(interface{ Streaming() bool })
	return ok && s.Streaming()
}

type backupItemAction struct{ *handle[api.BackupItemAction] }

func (b backupItemAction) AppliesTo() (sel api.ResourceSelector, err error) {
	err = b.do("AppliesTo", func(p api.BackupItemAction) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (b backupItemAction) Execute(item runtime.Unstructured, bk *v1.Backup) (out runtime.Unstructured, extra []api.ResourceIdentifier, err error) {
	err = b.do("Execute", func(p api.BackupItemAction) (e error) { out, extra, e = p.Execute(item, bk); return })
	return
}

type backupItemActionV2 struct {
	*handle[api.BackupItemActionV2]
}

func (b backupItemActionV2) Name() string { return b.entry.Name }

func (b backupItemActionV2) AppliesTo() (sel api.ResourceSelector, err error) {
	err = b.do("AppliesTo", func(p api.BackupItemActionV2) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (b backupItemActionV2) Execute(item runtime.Unstructured, bk *v1.Backup) (out runtime.Unstructured, extra []api.ResourceIdentifier, opID string, post []api.ResourceIdentifier, err error) {
	err = b.do("Execute", func(p api.BackupItemActionV2) (e error) { out, extra, opID, post, e = p.Execute(item, bk); return })
	return
}

func (b backupItemActionV2) Progress(opID string, bk *v1.Backup) (prog api.OperationProgress, err error) {
	err = b.do("Progress", func(p api.BackupItemActionV2) (e error) { prog, e = p.Progress(opID, bk); return })
	return
}

func (b backupItemActionV2) Cancel(opID string, bk *v1.Backup) error {
	return b.do("Cancel", func(p api.BackupItemActionV2) error { return p.Cancel(opID, bk) })
}

type restoreItemAction struct{ *handle[api.RestoreItemAction] }

func (r restoreItemAction) AppliesTo() (sel api.ResourceSelector, err error) {
	err = r.do("AppliesTo", func(p api.RestoreItemAction) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (r restoreItemAction) Execute(in *api.RestoreItemActionExecuteInput) (out *api.RestoreItemActionExecuteOutput, err error) {
	err = r.do("Execute", func(p api.RestoreItemAction) (e error) { out, e = p.Execute(in); return })
	return
}

type restoreItemActionV2 struct {
	*handle[api.RestoreItemActionV2]
}

func (r restoreItemActionV2) Name() string { return r.entry.Name }

func (r restoreItemActionV2) AppliesTo() (sel api.ResourceSelector, err error) {
	err = r.do("AppliesTo", func(p api.RestoreItemActionV2) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (r restoreItemActionV2) Execute(in *api.RestoreItemActionExecuteInput) (out *api.RestoreItemActionExecuteOutput, err error) {
	err = r.do("Execute", func(p api.RestoreItemActionV2) (e error) { out, e = p.Execute(in); return })
	return
}

func (r restoreItemActionV2) Progress(opID string, rs *v1.Restore) (prog api.OperationProgress, err error) {
	err = r.do("Progress", func(p api.RestoreItemActionV2) (e error) { prog, e = p.Progress(opID, rs); return })
	return
}

func (r restoreItemActionV2) Cancel(opID string, rs *v1.Restore) error {
	return r.do("Cancel", func(p api.RestoreItemActionV2) error { return p.Cancel(opID, rs) })
}

func (r restoreItemActionV2) AreAdditionalItemsReady(items []api.ResourceIdentifier, rs *v1.Restore) (ready bool, err error) {
	err = r.do("AreAdditionalItemsReady", func(p api.RestoreItemActionV2) (e error) { ready, e = p.AreAdditionalItemsReady(items, rs); return })
	return
}

type volumeSnapshotter struct{ *handle[api.VolumeSnapshotter] }

func (v volumeSnapshotter) Init(config map[string]string) error {
	return v.setInit(config, func(p api.VolumeSnapshotter) error { return p.Init(config) })
}

func (v volumeSnapshotter) CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (id string, err error) {
	err = v.do("CreateVolumeFromSnapshot", func(p api.VolumeSnapshotter) (e error) {
		id, e = p.CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ, iops)
		return
	})
	return
}

func (v volumeSnapshotter) GetVolumeInfo(volumeID, volumeAZ string) (typ string, iops *int64, err error) {
	err = v.do("GetVolumeInfo", func(p api.VolumeSnapshotter) (e error) { typ, iops, e = p.GetVolumeInfo(volumeID, volumeAZ); return })
	return
}

func (v volumeSnapshotter) CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (id string, err error) {
	err = v.do("CreateSnapshot", func(p api.VolumeSnapshotter) (e error) { id, e = p.CreateSnapshot(volumeID, volumeAZ, tags); return })
	return
}

func (v volumeSnapshotter) DeleteSnapshot(snapshotID string) error {
	return v.do("DeleteSnapshot", func(p api.VolumeSnapshotter) error { return p.DeleteSnapshot(snapshotID) })
}

func (v volumeSnapshotter) GetVolumeID(pv runtime.Unstructured) (id string, err error) {
	err = v.do("GetVolumeID", func(p api.VolumeSnapshotter) (e error) { id, e = p.GetVolumeID(pv); return })
	return
}

func (v volumeSnapshotter) SetVolumeID(pv runtime.Unstructured, volumeID string) (out runtime.Unstructured, err error) {
	err = v.do("SetVolumeID", func(p api.VolumeSnapshotter) (e error) { out, e = p.SetVolumeID(pv, volumeID); return })
	return
}

type itemBlockAction struct{ *handle[api.ItemBlockAction] }

func (i itemBlockAction) Name() string { return i.entry.Name }

func (i itemBlockAction) AppliesTo() (sel api.ResourceSelector, err error) {
	err = i.do("AppliesTo", func(p api.ItemBlockAction) (e error) { sel, e = p.AppliesTo(); return })
	return
}

func (i itemBlockAction) GetRelatedItems(item runtime.Unstructured, bk *v1.Backup) (out []api.ResourceIdentifier, err error) {
	err = i.do("GetRelatedItems", func(p api.ItemBlockAction) (e error) { out, e = p.GetRelatedItems(item, bk); return })
	return
}
