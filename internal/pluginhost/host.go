package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// DefaultTimeouts bound one call to a plugin of each kind: a plugin that
// does not answer in time is treated as hung and restarted.
//
// ObjectStore calls talk to remote storage and get five minutes. Its two
// streaming calls, PutObject and GetObject, may move any amount of data for
// as long as it takes (a backup's tarball is uploaded while the backup
// runs), so for them the bound is on progress, not on the whole call: each
// wait for the plugin to take or give a chunk gets the timeout, and time
// the server itself spends producing or consuming the data does not count.
// The last wait of an upload also covers the data gRPC has already buffered
// for the plugin (its flow-control window, at most 16 MiB) and the plugin's
// finishing the upload: five minutes still takes a plugin slower than about
// 50 KiB/s to trip it.
var DefaultTimeouts = map[api.Kind]time.Duration{
	api.KindObjectStore:         5 * time.Minute,
	api.KindBackupItemAction:    time.Minute,
	api.KindBackupItemActionV2:  time.Minute,
	api.KindRestoreItemAction:   time.Minute,
	api.KindRestoreItemActionV2: time.Minute,
	api.KindDeleteItemAction:    time.Minute,
	api.KindItemBlockAction:     time.Minute,
	api.KindVolumeSnapshotter:   10 * time.Minute,
}

// DefaultMaxMessageSize bounds one gRPC message from a plugin: room for an
// item as large as an archive entry may be (64 MiB) twice over, and for
// listings of large buckets, yet far below the 2 GiB go-plugin allows by
// default, which a broken or hostile plugin could make the server allocate.
const DefaultMaxMessageSize = 128 << 20

// MinMaxMessageSize is the smallest limit allowed: gRPC's default, which
// plugins built with the SDK stay within when they answer over the
// BackupItemAction stream (a message too large for it would break the
// stream for every call on it).
const MinMaxMessageSize = 4 << 20

// CheckMaxMessageSize says what is wrong with n as a message size limit.
func CheckMaxMessageSize(n int64) error {
	if n < MinMaxMessageSize || n > math.MaxInt32 {
		return fmt.Errorf("%d bytes is outside %d (4Mi) to %d (2Gi - 1)", n, MinMaxMessageSize, math.MaxInt32)
	}
	return nil
}

// DefaultIdleTimeout is how long a process started for one Init config may
// sit idle before it is stopped.
const DefaultIdleTimeout = 5 * time.Minute

// Options configure a Host.
type Options struct {
	// Dir is scanned recursively for plugin binaries.
	Dir string
	// Timeouts override DefaultTimeouts per kind.
	Timeouts map[api.Kind]time.Duration
	// MaxMessageSize bounds one gRPC message from a plugin (see
	// CheckMaxMessageSize); 0 means DefaultMaxMessageSize.
	MaxMessageSize int
	// IdleTimeout is how long a process started for one Init config (of an
	// ObjectStore or VolumeSnapshotter) may have no call in flight before
	// it is stopped; the next call starts a new one and replays Init. 0
	// means DefaultIdleTimeout. Each binary's shared process, which serves
	// every plugin without a config, is kept: there is one per binary, and
	// action plugins may keep state between the polls of an operation.
	IdleTimeout time.Duration
	// LogLevel is passed to plugin processes as --log-level.
	LogLevel string
	Log      *slog.Logger
}

// Host runs plugins. It is safe for concurrent use.
type Host struct {
	opts     Options
	log      *slog.Logger
	registry *registry
	builtins map[key]func() (any, error)

	mu     sync.Mutex
	procs  map[string]*process
	closed bool
	// starting serialises the start of each binary's process without
	// making other binaries wait for a slow one.
	starting map[string]*sync.Mutex
}

// New creates a host with no plugins; add built-ins with RegisterBuiltIn
// and find external ones with Discover.
func New(opts Options) *Host {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	return &Host{opts: opts, log: opts.Log, registry: newRegistry(), builtins: map[key]func() (any, error){}, procs: map[string]*process{}, starting: map[string]*sync.Mutex{}}
}

// RegisterBuiltIn adds a plugin served inside the server. newPlugin must
// return a value implementing the kind's interface in pkg/plugin/api.
func (h *Host) RegisterBuiltIn(kind api.Kind, name string, newPlugin func() (any, error)) error {
	if err := api.ValidateName(name); err != nil {
		return err
	}
	if _, err := h.registry.add(Entry{Kind: kind, Name: name, Binary: BuiltIn}); err != nil {
		return err
	}
	h.builtins[key{kind, name}] = newPlugin
	return nil
}

// Discover scans the plugin dir and asks every binary for its plugins. A
// binary that cannot be started or listed, or a duplicate plugin, is an
// error: a server that silently ran without a plugin could back up without
// what the plugin adds, or delete backups without cleaning up.
func (h *Host) Discover(ctx context.Context) error {
	binaries, skipped, err := scanDir(h.opts.Dir)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		h.log.Warn("ignoring file in plugin dir", "file", s)
	}
	for _, bin := range binaries {
		ids, err := h.listPlugins(ctx, bin)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := api.ValidateName(id.Name); err != nil {
				return fmt.Errorf("plugin binary %s: %w", bin, err)
			}
			replaced, err := h.registry.add(Entry{Kind: id.Kind, Name: id.Name, Binary: bin})
			if err != nil {
				return err
			}
			if replaced != nil {
				h.log.Warn("a plugin binary replaces a built-in plugin", "kind", id.Kind, "name", id.Name, "binary", bin)
			}
		}
	}
	return nil
}

func (h *Host) listPlugins(ctx context.Context, bin string) ([]framework.PluginIdentifier, error) {
	p, err := h.acquire(bin, "")
	if err != nil {
		return nil, err
	}
	defer h.release(p)
	raw, err := p.dispense(api.KindPluginLister)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids, err := framework.PluginListerClient(raw).ListPlugins(lctx)
	if err != nil {
		return nil, fmt.Errorf("plugin binary %s: listing its plugins: %w", bin, err)
	}
	return ids, nil
}

// List returns every plugin: built-ins first, then by kind and name.
func (h *Host) List() []Entry { return h.registry.list() }

// Names returns the names of the plugins of one kind, in list order.
func (h *Host) Names(kind api.Kind) []string {
	var names []string
	for _, e := range h.registry.ofKind(kind) {
		names = append(names, e.Name)
	}
	return names
}

// Has reports whether a plugin of kind and name exists.
func (h *Host) Has(kind api.Kind, name string) bool {
	_, ok := h.registry.get(kind, name)
	return ok
}

// IsExternal reports whether kind and name are served by a plugin binary
// (rather than built in, or not at all).
func (h *Host) IsExternal(kind api.Kind, name string) bool {
	e, ok := h.registry.get(kind, name)
	return ok && e.Binary != BuiltIn
}

// Close stops every plugin process.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for k, p := range h.procs {
		if p.idle != nil {
			p.idle.Stop()
		}
		p.kill()
		delete(h.procs, k)
	}
}

func (h *Host) timeout(kind api.Kind) time.Duration {
	if d, ok := h.opts.Timeouts[kind]; ok {
		return d
	}
	return DefaultTimeouts[kind]
}

func (h *Host) maxMessageSize() int { return h.opts.MaxMessageSize }

// refusedAsTooLarge reports whether err is gRPC refusing a message from a
// plugin for being over this host's limit (rather than the plugin refusing
// one from the host, with the same code, over its own).
func (h *Host) refusedAsTooLarge(err error) bool {
	var pe *framework.PluginError
	if !errors.As(err, &pe) || pe.Code() != codes.ResourceExhausted {
		return false
	}
	// gRPC says "received message larger than max (<size> vs. <limit>)".
	msg := pe.Message()
	return strings.Contains(msg, "larger than max") && strings.HasSuffix(msg, fmt.Sprintf(" %d)", h.opts.MaxMessageSize))
}

// acquire returns the running process of bin for instance, starting it if
// needed, and counts a call on it until release. Plugins configured by
// Init (object stores, volume snapshotters) keep one configuration per
// process, so each distinct configuration gets its own process (instance
// is a digest of it); everything else shares the binary's process
// (instance "").
func (h *Host) acquire(bin, instance string) (*process, error) {
	k := bin + "\x00" + instance
	if p := h.use(k); p != nil {
		return p, nil
	}
	h.mu.Lock()
	start, ok := h.starting[k]
	if !ok {
		start = &sync.Mutex{}
		h.starting[k] = start
	}
	h.mu.Unlock()

	start.Lock()
	defer start.Unlock()
	if p := h.use(k); p != nil {
		return p, nil
	}
	p, err := h.startProcess(bin)
	if err != nil {
		return nil, err
	}
	p.key, p.reapable, p.inUse = k, instance != "", 1
	h.mu.Lock()
	h.procs[k] = p
	h.mu.Unlock()
	return p, nil
}

// use counts a call on the live process under k, if there is one.
func (h *Host) use(k string) *process {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.procs[k]
	if !ok || p.exited() {
		return nil
	}
	p.inUse++
	p.idleSince++ // a reap already on its way finds the process busy
	if p.idle != nil {
		p.idle.Stop()
	}
	return p
}

// release ends a call counted by acquire. A process started for an Init
// config that has no call left is stopped once it has stayed so for
// IdleTimeout: a server that sees many configurations (locations come and
// go, credentials change) would otherwise keep a process for each forever.
func (h *Host) release(p *process) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.inUse--
	if p.inUse > 0 || !p.reapable || h.closed || h.procs[p.key] != p {
		return
	}
	p.idleSince++
	since := p.idleSince
	p.idle = time.AfterFunc(h.opts.IdleTimeout, func() { h.reap(p, since) })
}

// reap stops p if it is still the idle process release left it as.
func (h *Host) reap(p *process, since uint64) {
	h.mu.Lock()
	idle := h.procs[p.key] == p && p.inUse == 0 && p.idleSince == since
	if idle {
		delete(h.procs, p.key)
	}
	h.mu.Unlock()
	if idle {
		h.log.Debug("stopping idle plugin process", "binary", p.bin, "idle", h.opts.IdleTimeout)
		p.kill()
	}
}

// restart throws away p (crashed or hung); the next call starts a new
// process. A process already replaced was killed by whoever replaced it
// (or had exited), and its replacement is left alone.
func (h *Host) restart(p *process, why error) {
	h.mu.Lock()
	current := h.procs[p.key] == p
	if current {
		delete(h.procs, p.key)
	}
	h.mu.Unlock()
	if current {
		h.log.Warn("restarting plugin process", "binary", p.bin, "reason", why.Error())
		p.kill()
	}
}

// process is one running plugin binary.
type process struct {
	bin    string
	client *plugin.Client
	rpc    plugin.ClientProtocol

	// Set by acquire, then guarded by Host.mu.
	key      string
	reapable bool
	// inUse counts calls in flight; idleSince numbers the times it fell to
	// zero, so that a reap timer knows whether the idle spell it was set
	// for is still going on.
	inUse     int
	idleSince uint64
	idle      *time.Timer
}

func (h *Host) startProcess(bin string) (*process, error) {
	logLevel := h.opts.LogLevel
	// Plugins get the flags every plugin understands; the SDKs ignore the
	// rest, but passing the server's own could confuse older plugins.
	// Velero's SDK parses the level with logrus, which knows "warning" but
	// not "warn"; Lifeboat's accepts both.
	if logLevel == "warn" {
		logLevel = "warning"
	}
	cmd := exec.Command(bin, "--log-level", logLevel)
	// A plugin must not outlive the server, even when the server is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  framework.Handshake,
		Plugins:          framework.ClientPluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: slogWriter{h.log}, Level: hclog.Info}),
		StartTimeout:     30 * time.Second,
		// Applied after go-plugin's own 2 GiB default, so it wins. gRPC
		// checks a message's length before reading it: a plugin's
		// oversized answer costs the server nothing.
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(h.opts.MaxMessageSize))},
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("starting plugin binary %s: %w", bin, err)
	}
	return &process{bin: bin, client: client, rpc: rpc}, nil
}

func (p *process) exited() bool { return p.client.Exited() }

func (p *process) kill() { p.client.Kill() }

func (p *process) dispense(kind api.Kind) (any, error) {
	raw, err := p.rpc.Dispense(string(kind))
	if err != nil {
		return nil, fmt.Errorf("plugin binary %s does not serve %s plugins: %w", p.bin, kind, err)
	}
	return raw, nil
}

// slogWriter forwards what plugin processes write to stderr to the server's
// log, one line per record.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(b []byte) (int, error) {
	w.log.Info("plugin output", "line", string(trimNewline(b)))
	return len(b), nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

var _ io.Writer = slogWriter{}

// errNotFound says no plugin of a kind and name exists.
var errNotFound = errors.New("no such plugin")
