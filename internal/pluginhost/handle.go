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

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// clientFunc makes a client of kind for plugin name from a dispensed value.
type clientFunc[T any] func(dispensed any, name string, timeout time.Duration) (T, error)

// handle is one plugin as callers see it: calls go to the plugin's current
// process, by the rules of failed calls:
//   - a call past its kind's timeout restarts the process, since a plugin
//     that hung once cannot be trusted with the next call;
//   - a call that finds its process gone (crashed) restarts it and, if the
//     method may be repeated (retryAfterCrash), is tried once more;
//   - a reply larger than the host accepts is refused, naming the limit.
type handle[T any] struct {
	h      *Host
	entry  Entry
	client clientFunc[T]

	// init, once set (ObjectStore and VolumeSnapshotter Init), is replayed
	// on every new process: a restarted or reaped plugin has forgotten its
	// config.
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

// do makes a call of method (named as in retryAfterCrash).
func (hd *handle[T]) do(method string, call func(T) error) error {
	return hd.run(method, func(impl T, _ *process) (bool, error) { return false, call(impl) })
}

// run is do for a call whose result goes on using the process after the
// call returns (a download being read). Such a call returns hold: the
// process then stays in use until the result gives it back (Host.release),
// and the result applies the rules to its own failures (failed, answering).
func (hd *handle[T]) run(method string, call func(T, *process) (hold bool, err error)) error {
	for t := firstTry; ; t = retried {
		impl, p, err := hd.acquire()
		if err != nil {
			return err
		}
		failing := method
		var hold bool
		if err = hd.ensureInit(impl, p); err != nil {
			failing = "Init"
		} else if hold, err = call(impl, p); hold && err == nil {
			return nil
		}
		hd.h.release(p)
		if err == nil {
			return nil
		}
		again, err := hd.failed(failing, p, err, t)
		if !again {
			return err
		}
	}
}

// try says how far a call has got when it fails.
type try int

const (
	firstTry  try = iota // it may be made again
	retried              // it was made again already
	answering            // it began to answer (a download): it cannot be made again
)

// failed applies the rules to a call of method on p that failed with err:
// it returns whether to make the call again, or the error to report.
func (hd *handle[T]) failed(method string, p *process, err error, t try) (again bool, _ error) {
	e := hd.entry
	switch hd.code(err) {
	case codes.Unavailable, codes.Canceled:
		hd.h.restart(p, err)
		switch {
		case t == answering:
			return false, fmt.Errorf("%s plugin %s (%s): its process died during %s: %w", e.Kind, e.Name, e.Binary, method, err)
		case !retryAfterCrash[e.Kind][method]:
			return false, fmt.Errorf("%s plugin %s (%s): its process died during %s, which is not repeated since it may have taken effect before the crash: %w",
				e.Kind, e.Name, e.Binary, method, err)
		case t == firstTry:
			return true, nil
		}
		return false, fmt.Errorf("%s plugin %s (%s) crashed twice: %w", e.Kind, e.Name, e.Binary, err)
	case codes.DeadlineExceeded:
		hd.h.restart(p, err)
		return false, fmt.Errorf("%s plugin %s (%s) did not answer within %s and was restarted: %w",
			e.Kind, e.Name, e.Binary, hd.h.timeout(e.Kind), err)
	case codes.ResourceExhausted:
		if hd.h.refusedAsTooLarge(err) {
			return false, fmt.Errorf("%s plugin %s (%s) sent a message larger than the server accepts from plugins (%d bytes; raise --plugin-max-message-size if the plugin is right to): %w",
				e.Kind, e.Name, e.Binary, hd.h.maxMessageSize(), err)
		}
	}
	return false, err
}

// acquire returns a client of the plugin's current process (started if
// need be) and the process, which the caller gives back with Host.release.
// A call that fails restarts that process only, not one another failed
// call already started in its place (every call in flight on a process
// that died fails at once).
func (hd *handle[T]) acquire() (T, *process, error) {
	var zero T
	p, err := hd.h.acquire(hd.entry.Binary, hd.instanceKey())
	if err != nil {
		return zero, nil, err
	}
	raw, err := p.dispense(hd.entry.Kind)
	if err == nil {
		var impl T
		if impl, err = hd.client(raw, hd.entry.Name, hd.h.timeout(hd.entry.Kind)); err == nil {
			return impl, p, nil
		}
	}
	hd.h.release(p)
	return zero, nil, err
}

// ensureInit replays Init on a process that has not had it yet.
func (hd *handle[T]) ensureInit(impl T, p *process) error {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.init == nil || hd.initialized == p {
		return nil
	}
	if err := hd.init(impl); err != nil {
		return err
	}
	hd.initialized = p
	return nil
}

// setInit records init (and the config it applies, which selects the
// process) and runs it.
func (hd *handle[T]) setInit(config map[string]string, init func(T) error) error {
	hd.mu.Lock()
	hd.init, hd.initialized, hd.instance = init, nil, configDigest(config)
	hd.mu.Unlock()
	return hd.do("Init", func(T) error { return nil })
}

func (hd *handle[T]) instanceKey() string {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.instance
}

// code is the gRPC code of err when err is a failed call to this plugin;
// OK for anything else, such as a local error or another plugin's error
// passing through (an upload whose body is another store's download).
func (hd *handle[T]) code(err error) codes.Code {
	var pe *framework.PluginError
	if errors.As(err, &pe) && pe.Kind == hd.entry.Kind && pe.Name == hd.entry.Name {
		return pe.Code()
	}
	return codes.OK
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
