package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// DefaultTimeouts bound one call to a plugin of each kind. ObjectStore calls
// stream whole archives and have none; everything else should answer within
// a minute, and a plugin that does not is treated as hung.
var DefaultTimeouts = map[api.Kind]time.Duration{
	api.KindBackupItemAction:    time.Minute,
	api.KindBackupItemActionV2:  time.Minute,
	api.KindRestoreItemAction:   time.Minute,
	api.KindRestoreItemActionV2: time.Minute,
	api.KindDeleteItemAction:    time.Minute,
	api.KindItemBlockAction:     time.Minute,
	api.KindVolumeSnapshotter:   10 * time.Minute,
}

// Options configure a Host.
type Options struct {
	// Dir is scanned recursively for plugin binaries.
	Dir string
	// Timeouts override DefaultTimeouts per kind.
	Timeouts map[api.Kind]time.Duration
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

	mu    sync.Mutex
	procs map[string]*process
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
			replaced, err := h.registry.add(Entry{Kind: api.Kind(id.Kind), Name: id.Name, Binary: bin})
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
	p, err := h.process(bin, "")
	if err != nil {
		return nil, err
	}
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
	for bin, p := range h.procs {
		p.kill()
		delete(h.procs, bin)
	}
}

func (h *Host) timeout(kind api.Kind) time.Duration {
	if d, ok := h.opts.Timeouts[kind]; ok {
		return d
	}
	return DefaultTimeouts[kind]
}

// process returns the running process of bin for instance, starting it if
// needed. Plugins configured by Init (object stores, volume snapshotters)
// keep one configuration per process, so each distinct configuration gets
// its own process (instance is a digest of it); everything else shares the
// binary's process (instance "").
func (h *Host) process(bin, instance string) (*process, error) {
	k := bin + "\x00" + instance
	h.mu.Lock()
	if p, ok := h.procs[k]; ok && !p.exited() {
		h.mu.Unlock()
		return p, nil
	}
	start, ok := h.starting[k]
	if !ok {
		start = &sync.Mutex{}
		h.starting[k] = start
	}
	h.mu.Unlock()

	start.Lock()
	defer start.Unlock()
	h.mu.Lock()
	if p, ok := h.procs[k]; ok && !p.exited() {
		h.mu.Unlock()
		return p, nil
	}
	h.mu.Unlock()
	p, err := startProcess(bin, h.opts.LogLevel, h.log)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.procs[k] = p
	h.mu.Unlock()
	return p, nil
}

// restart throws away p, a process of bin for instance (crashed or hung);
// the next call starts a new one. A process already replaced was killed by
// whoever replaced it (or had exited), and its replacement is left alone.
func (h *Host) restart(bin, instance string, p *process, why error) {
	k := bin + "\x00" + instance
	h.mu.Lock()
	current := h.procs[k] == p
	if current {
		delete(h.procs, k)
	}
	h.mu.Unlock()
	if current {
		h.log.Warn("restarting plugin process", "binary", bin, "reason", why.Error())
		p.kill()
	}
}

// process is one running plugin binary.
type process struct {
	bin    string
	client *plugin.Client
	rpc    plugin.ClientProtocol
}

func startProcess(bin, logLevel string, log *slog.Logger) (*process, error) {
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
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: slogWriter{log}, Level: hclog.Info}),
		StartTimeout:     30 * time.Second,
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
