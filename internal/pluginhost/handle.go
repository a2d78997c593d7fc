package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// clientFunc makes a client of kind for plugin name from a dispensed value.
type clientFunc[T any] func(dispensed any, name string, timeout time.Duration) (T, error)

// handle is one plugin as callers see it: calls go to the plugin's current
// process. A call that finds the process gone (crashed) restarts it and is
// tried once more; a call that times out restarts the process too, since a
// plugin that hung once cannot be trusted with the next call.
type handle[T any] struct {
	h      *Host
	entry  Entry
	client clientFunc[T]

	// init, once set (ObjectStore and VolumeSnapshotter Init), is replayed
	// on every new process: a restarted plugin has forgotten its config.
	mu          sync.Mutex
	init        func(T) error
	initialized *process
	// instance selects the process: a digest of the Init config, so that
	// two configurations of one plugin never share a process.
	instance string
}

// RemotePlugin marks plugins that run in another process: callers may hand
// them items still in JSON form (api.RawItem), which in-process plugins,
// written against *unstructured.Unstructured, would not expect.
func (hd *handle[T]) RemotePlugin() {}

func (hd *handle[T]) do(call func(T) error) error {
	for attempt := 0; ; attempt++ {
		impl, p, err := hd.getProcess()
		if err != nil {
			return err
		}
		err = call(impl)
		if err == nil {
			return nil
		}
		switch code(err) {
		case codes.Unavailable, codes.Canceled:
			hd.h.restart(hd.entry.Binary, hd.instanceKey(), p, err)
			if attempt == 0 {
				continue
			}
			return fmt.Errorf("%s plugin %s (%s) crashed twice: %w", hd.entry.Kind, hd.entry.Name, hd.entry.Binary, err)
		case codes.DeadlineExceeded:
			hd.h.restart(hd.entry.Binary, hd.instanceKey(), p, err)
			return fmt.Errorf("%s plugin %s (%s) did not answer within %s and was restarted: %w",
				hd.entry.Kind, hd.entry.Name, hd.entry.Binary, hd.h.timeout(hd.entry.Kind), err)
		}
		return err
	}
}

func (hd *handle[T]) get() (T, error) {
	impl, _, err := hd.getProcess()
	return impl, err
}

// getProcess is get, also returning the process the client talks to: a
// call that fails restarts that process only, not one another failed call
// already started in its place (every call in flight on a process that
// died fails at once).
func (hd *handle[T]) getProcess() (T, *process, error) {
	var zero T
	p, err := hd.h.process(hd.entry.Binary, hd.instanceKey())
	if err != nil {
		return zero, nil, err
	}
	raw, err := p.dispense(hd.entry.Kind)
	if err != nil {
		return zero, nil, err
	}
	impl, err := hd.client(raw, hd.entry.Name, hd.h.timeout(hd.entry.Kind))
	if err != nil {
		return zero, nil, err
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.init != nil && hd.initialized != p {
		if err := hd.init(impl); err != nil {
			return zero, nil, fmt.Errorf("%s plugin %s: Init: %w", hd.entry.Kind, hd.entry.Name, err)
		}
		hd.initialized = p
	}
	return impl, p, nil
}

// setInit records init (and the config it applies, which selects the
// process) and runs it.
func (hd *handle[T]) setInit(config map[string]string, init func(T) error) error {
	hd.mu.Lock()
	hd.init, hd.initialized, hd.instance = init, nil, configDigest(config)
	hd.mu.Unlock()
	_, err := hd.get()
	return err
}

func (hd *handle[T]) instanceKey() string {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.instance
}

// configDigest names a configuration independently of map order.
func configDigest(config map[string]string) string {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%q=%q;", k, config[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// code finds the gRPC status code in err; OK when there is none.
func code(err error) codes.Code {
	var coder interface{ GRPCStatus() *status.Status }
	if errors.As(err, &coder) {
		return coder.GRPCStatus().Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.OK
}

// lookup finds the entry of kind and name and returns either the built-in
// implementation or nil (and the entry) for an external one.
func lookup[T any](h *Host, kind api.Kind, name string) (T, *Entry, error) {
	var zero T
	e, ok := h.registry.get(kind, name)
	if !ok {
		return zero, nil, fmt.Errorf("%w: no %s plugin named %q (run `lifeboat plugin get` to list them)", errNotFound, kind, name)
	}
	if e.Binary != BuiltIn {
		return zero, &e, nil
	}
	v, err := h.builtins[key{e.Kind, e.Name}]()
	if err != nil {
		return zero, nil, fmt.Errorf("creating built-in %s plugin %s: %w", kind, e.Name, err)
	}
	impl, ok := v.(T)
	if !ok {
		return zero, nil, fmt.Errorf("built-in %s plugin %s does not implement the %s interface", kind, e.Name, kind)
	}
	return impl, nil, nil
}

// IsNotFound reports whether err says a plugin does not exist.
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// ObjectStore returns the object store plugin called name.
func (h *Host) ObjectStore(name string) (api.ObjectStore, error) {
	impl, e, err := lookup[api.ObjectStore](h, api.KindObjectStore, name)
	if err != nil || e == nil {
		return impl, err
	}
	return objectStore{&handle[api.ObjectStore]{h: h, entry: *e, client: framework.ObjectStoreClient}}, nil
}

// DeleteItemAction returns the delete item action called name.
func (h *Host) DeleteItemAction(name string) (api.DeleteItemAction, error) {
	impl, e, err := lookup[api.DeleteItemAction](h, api.KindDeleteItemAction, name)
	if err != nil || e == nil {
		return impl, err
	}
	return deleteItemAction{&handle[api.DeleteItemAction]{h: h, entry: *e, client: framework.DeleteItemActionClient}}, nil
}

// BackupItemAction returns the v1 backup item action called name.
func (h *Host) BackupItemAction(name string) (api.BackupItemAction, error) {
	impl, e, err := lookup[api.BackupItemAction](h, api.KindBackupItemAction, name)
	if err != nil || e == nil {
		return impl, err
	}
	return backupItemAction{&handle[api.BackupItemAction]{h: h, entry: *e, client: framework.BackupItemActionClient}}, nil
}

// BackupItemActionV2 returns the v2 backup item action called name.
func (h *Host) BackupItemActionV2(name string) (api.BackupItemActionV2, error) {
	impl, e, err := lookup[api.BackupItemActionV2](h, api.KindBackupItemActionV2, name)
	if err != nil || e == nil {
		return impl, err
	}
	return backupItemActionV2{&handle[api.BackupItemActionV2]{h: h, entry: *e, client: framework.BackupItemActionV2Client}}, nil
}

// RestoreItemAction returns the v1 restore item action called name.
func (h *Host) RestoreItemAction(name string) (api.RestoreItemAction, error) {
	impl, e, err := lookup[api.RestoreItemAction](h, api.KindRestoreItemAction, name)
	if err != nil || e == nil {
		return impl, err
	}
	return restoreItemAction{&handle[api.RestoreItemAction]{h: h, entry: *e, client: framework.RestoreItemActionClient}}, nil
}

// RestoreItemActionV2 returns the v2 restore item action called name.
func (h *Host) RestoreItemActionV2(name string) (api.RestoreItemActionV2, error) {
	impl, e, err := lookup[api.RestoreItemActionV2](h, api.KindRestoreItemActionV2, name)
	if err != nil || e == nil {
		return impl, err
	}
	return restoreItemActionV2{&handle[api.RestoreItemActionV2]{h: h, entry: *e, client: framework.RestoreItemActionV2Client}}, nil
}

// VolumeSnapshotter returns the volume snapshotter called name.
func (h *Host) VolumeSnapshotter(name string) (api.VolumeSnapshotter, error) {
	impl, e, err := lookup[api.VolumeSnapshotter](h, api.KindVolumeSnapshotter, name)
	if err != nil || e == nil {
		return impl, err
	}
	return volumeSnapshotter{&handle[api.VolumeSnapshotter]{h: h, entry: *e, client: framework.VolumeSnapshotterClient}}, nil
}

// ItemBlockAction returns the item block action called name.
func (h *Host) ItemBlockAction(name string) (api.ItemBlockAction, error) {
	impl, e, err := lookup[api.ItemBlockAction](h, api.KindItemBlockAction, name)
	if err != nil || e == nil {
		return impl, err
	}
	return itemBlockAction{&handle[api.ItemBlockAction]{h: h, entry: *e, client: framework.ItemBlockActionClient}}, nil
}
