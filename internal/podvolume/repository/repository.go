// Package repository opens the kopia repositories that hold file-system
// backup data, one per (volume namespace, backup storage location), where
// and as Velero keeps them: under <bucket>/<prefix>/kopia/<namespace>/ of
// the location, created with Velero's options, with the password of the
// Secret velero-repo-credentials, so that Velero and Lifeboat open each
// other's repositories.
//
// A Manager keeps each repository it opened open while it is used
// (connecting costs several round trips and reads the indexes), shared by
// every caller: kopia's repository is safe for concurrent use, and each
// transfer writes through a writer of its own. A repository no caller has
// used for IdleTimeout is closed and its cache removed, so that a process
// serving many namespaces holds only the repositories in use.
package repository

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/compression"
	"github.com/kopia/kopia/repo/content"
	"github.com/kopia/kopia/repo/encryption"
	"github.com/kopia/kopia/repo/format"
	"github.com/kopia/kopia/repo/hashing"
	"github.com/kopia/kopia/repo/maintenance"
	"github.com/kopia/kopia/repo/splitter"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/snapshotmaintenance"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// Velero's identity in its repositories: every client is default@default,
// which is also the maintenance owner (kopia runs maintenance only for
// its owner), and "unified repo" describes the connection.
const (
	UserName          = "default"
	Hostname          = "default"
	connectDesc       = "unified repo"
	maintenanceDesc   = "UdmRepoMaintenance"
	udmRepoBlobID     = "udmrepo.Repository"
	defaultCacheLimit = 5000 << 20
	// DefaultIdleTimeout is how long a repository stays open unused.
	DefaultIdleTimeout = 5 * time.Minute
)

// ErrNotFound says that a repository has not been created.
var ErrNotFound = errors.New("repository not created")

// Manager opens repositories and keeps them open.
type Manager struct {
	// Storage resolves a location's credentials and CA bundle.
	Storage StorageResolver
	// Secrets reads the password Secret (an uncached reader).
	Secrets client.Reader
	// Namespace holds the password Secret (the server's).
	Namespace string
	// WorkDir holds the connections' config files and caches; the
	// process's own work directory.
	WorkDir string
	Log     *slog.Logger
	// IdleTimeout closes a repository that no caller has used for that
	// long, and removes its cache; the next caller opens it again.
	// 0 means DefaultIdleTimeout, a negative value never closes one.
	IdleTimeout time.Duration
	// Compression is the kopia compressor a repository this manager
	// creates gets in its global policy ("" or "none": none, as Velero
	// creates them). Repositories that exist keep their policy.
	Compression string

	mu    sync.Mutex
	repos map[key]*handle
	// stale are replaced connections still in use, closed by their last
	// user (or by Close).
	stale map[*handle]bool
}

type key struct{ location, namespace string }

type handle struct {
	mu      sync.Mutex // held while opening or closing
	rep     repo.Repository
	version string // specVersion of the location it was opened with
	dir     string // the connection's config and cache
	users   int
	stale   bool
	// idle closes the repository once unused for the idle timeout;
	// idleGen tells a timer that fired after the handle was taken again
	// (or closed) that it is out of date.
	idle    *time.Timer
	idleGen uint64
}

// Status is how far a repository's storage is set up, as Velero tells it.
type Status int

const (
	// StatusAbsent: no kopia repository in the storage.
	StatusAbsent Status = iota
	// StatusUninitialized: kopia's format blob exists, Velero's metadata
	// blob does not (a creation interrupted half-way).
	StatusUninitialized
	// StatusReady: both, and they agree.
	StatusReady
)

func (m *Manager) storage(ctx context.Context, r podvolume.Repository, create bool) (blob.Storage, error) {
	res, err := m.Storage.ResolveStorage(ctx, r.Location)
	if err != nil {
		return nil, err
	}
	return openStorage(ctx, res, r.Location, r.VolumeNamespace, create)
}

// Prepare creates the repository if its storage holds none (with Velero's
// options and metadata) and checks that it opens with the password.
func (m *Manager) Prepare(ctx context.Context, r podvolume.Repository) error {
	ctx = WithKopiaLog(ctx, m.Log)
	if r.Location.Spec.AccessMode == "ReadOnly" {
		_, release, err := m.Open(ctx, r)
		if err != nil {
			return err
		}
		release()
		return nil
	}
	st, err := m.storage(ctx, r, true)
	if err != nil {
		return err
	}
	defer st.Close(ctx)
	status, err := RepositoryStatus(ctx, st)
	if err != nil {
		return err
	}
	password, err := readPassword(ctx, m.Secrets, m.Namespace)
	if err != nil {
		return err
	}
	if status == StatusAbsent {
		m.log().Info("creating file-system backup repository", "location", r.Location.Name, "volumeNamespace", r.VolumeNamespace, "prefix", Prefix(r.Location, r.VolumeNamespace))
		if err := ensureEmpty(ctx, st); err != nil {
			return err
		}
		if err := repo.Initialize(ctx, st, NewRepositoryOptions(), password); err != nil {
			return fmt.Errorf("creating kopia repository: %w", err)
		}
	}
	rep, release, err := m.Open(ctx, r)
	if err != nil {
		return err
	}
	defer release()
	if status != StatusReady {
		if err := writeInitParameters(ctx, rep); err != nil {
			return err
		}
		if err := writeCompression(ctx, rep, m.Compression); err != nil {
			return err
		}
		if err := writeUdmRepoMetadata(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// NewRepositoryOptions are the options Velero creates repositories with:
// kopia's default hash, encryption and splitter, named explicitly so that
// a kopia upgrade changing a default cannot make the two differ silently.
func NewRepositoryOptions() *repo.NewRepositoryOptions {
	return &repo.NewRepositoryOptions{
		BlockFormat: format.ContentFormat{
			Hash:       hashing.DefaultAlgorithm,
			Encryption: encryption.DefaultAlgorithm,
		},
		ObjectFormat: format.ObjectFormat{Splitter: splitter.DefaultAlgorithm},
	}
}

// RepositoryStatus reads how far the storage is set up.
func RepositoryStatus(ctx context.Context, st blob.Storage) (Status, error) {
	var fb bytesOutput
	if err := st.GetBlob(ctx, format.KopiaRepositoryBlobID, 0, -1, &fb); err != nil {
		if errors.Is(err, blob.ErrBlobNotFound) {
			return StatusAbsent, nil
		}
		return 0, fmt.Errorf("reading the repository's format blob: %w", err)
	}
	f, err := format.ParseKopiaRepositoryJSON(fb.Bytes())
	if err != nil {
		return 0, fmt.Errorf("the repository's format blob is corrupt: %w", err)
	}
	var mb bytesOutput
	if err := st.GetBlob(ctx, udmRepoBlobID, 0, -1, &mb); err != nil {
		if errors.Is(err, blob.ErrBlobNotFound) {
			return StatusUninitialized, nil
		}
		return 0, fmt.Errorf("reading blob %s: %w", udmRepoBlobID, err)
	}
	var meta udmRepoMetadata
	if err := json.Unmarshal(mb.Bytes(), &meta); err != nil {
		return 0, fmt.Errorf("blob %s is corrupt: %w", udmRepoBlobID, err)
	}
	if !bytes.Equal(meta.UniqueID, f.UniqueID) {
		return 0, fmt.Errorf("blob %s names another repository than the format blob (unique IDs differ)", udmRepoBlobID)
	}
	return StatusReady, nil
}

// udmRepoMetadata is Velero's marker that it finished creating a
// repository: the repository's unique ID.
type udmRepoMetadata struct {
	UniqueID []byte `json:"uniqueID"`
}

func writeUdmRepoMetadata(ctx context.Context, st blob.Storage) error {
	var fb bytesOutput
	if err := st.GetBlob(ctx, format.KopiaRepositoryBlobID, 0, -1, &fb); err != nil {
		return fmt.Errorf("reading the repository's format blob: %w", err)
	}
	f, err := format.ParseKopiaRepositoryJSON(fb.Bytes())
	if err != nil {
		return err
	}
	data, err := json.Marshal(udmRepoMetadata{UniqueID: f.UniqueID})
	if err != nil {
		return err
	}
	if err := st.PutBlob(ctx, udmRepoBlobID, gatherBytes(data), blob.PutOptions{}); err != nil {
		return fmt.Errorf("writing blob %s: %w", udmRepoBlobID, err)
	}
	return nil
}

// writeInitParameters makes default@default the maintenance owner with
// kopia's default schedule, as Velero does when it creates a repository.
func writeInitParameters(ctx context.Context, rep repo.Repository) error {
	p, err := maintenance.GetParams(ctx, rep)
	if err != nil {
		return fmt.Errorf("reading maintenance parameters: %w", err)
	}
	owner := UserName + "@" + Hostname
	if p.Owner == owner {
		return nil
	}
	return repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "set init parameters"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		np := maintenance.DefaultParams()
		np.Owner = owner
		if err := maintenance.SetParams(ctx, w, &np); err != nil {
			return fmt.Errorf("setting maintenance parameters: %w", err)
		}
		return nil
	})
}

// CheckCompression says whether name is a compressor kopia knows, naming
// the ones it does when it is not.
func CheckCompression(name string) error {
	if name == "" || name == "none" {
		return nil
	}
	if compression.ByName[compression.Name(name)] != nil && !compression.IsDeprecated[compression.Name(name)] {
		return nil
	}
	var known []string
	for n := range compression.ByName {
		if !compression.IsDeprecated[n] {
			known = append(known, string(n))
		}
	}
	sort.Strings(known)
	return fmt.Errorf("unknown compressor %q: use none or one of kopia's: %s", name, strings.Join(known, ", "))
}

// writeCompression puts the compressor into a new repository's global
// policy, where the data path reads it (kopiapath): Velero's own uploads
// set none on their sources and stay uncompressed; either side restores
// both, as kopia marks each compressed content with its compressor.
func writeCompression(ctx context.Context, rep repo.Repository, name string) error {
	if name == "" || name == "none" {
		return nil
	}
	if err := CheckCompression(name); err != nil {
		return err
	}
	return repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "set compression"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		pol, err := policy.GetDefinedPolicy(ctx, w, policy.GlobalPolicySourceInfo)
		if errors.Is(err, policy.ErrPolicyNotFound) {
			pol, err = &policy.Policy{}, nil
		}
		if err != nil {
			return fmt.Errorf("reading the repository's global policy: %w", err)
		}
		pol.CompressionPolicy.CompressorName = compression.Name(name)
		if err := policy.SetPolicy(ctx, w, policy.GlobalPolicySourceInfo, pol); err != nil {
			return fmt.Errorf("setting compressor %s in the repository's global policy: %w", name, err)
		}
		return nil
	})
}

// Compressor is the compressor in the repository's global policy, "" when
// it names none (a repository Velero created).
func Compressor(ctx context.Context, rep repo.Repository) (string, error) {
	pol, err := policy.GetDefinedPolicy(ctx, rep, policy.GlobalPolicySourceInfo)
	if errors.Is(err, policy.ErrPolicyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the repository's global policy: %w", err)
	}
	name := string(pol.CompressionPolicy.CompressorName)
	if name == "none" {
		return "", nil
	}
	return name, nil
}

func ensureEmpty(ctx context.Context, st blob.Storage) error {
	errHasData := errors.New("has data")
	err := st.ListBlobs(ctx, "", func(blob.Metadata) error { return errHasData })
	if errors.Is(err, errHasData) {
		return errors.New("the repository's prefix holds data but no kopia repository; empty it or use another location")
	}
	if err != nil {
		return fmt.Errorf("listing the repository's storage: %w", err)
	}
	return nil
}

// Open returns the open repository (connecting to it the first time) and
// a function to call when done with it. ErrNotFound when none exists.
func (m *Manager) Open(ctx context.Context, r podvolume.Repository) (repo.Repository, func(), error) {
	k := key{location: r.Location.Namespace + "/" + r.Location.Name, namespace: r.VolumeNamespace}
	var toClose repo.Repository
	m.mu.Lock()
	if m.repos == nil {
		m.repos = map[key]*handle{}
		m.stale = map[*handle]bool{}
	}
	version := specVersion(r.Location)
	h := m.repos[k]
	if h != nil {
		h.stopIdle()
	}
	if h != nil && h.version != version {
		// The location changed (credentials, endpoint): new callers get a
		// new connection; the old one closes when its last user is done.
		h.stale = true
		if h.users == 0 && h.rep != nil {
			toClose = h.rep
		} else {
			m.stale[h] = true
		}
		h = nil
	}
	if h == nil {
		h = &handle{version: version, dir: m.dir(r)}
		m.repos[k] = h
	}
	h.users++
	m.mu.Unlock()
	if toClose != nil {
		m.closeRepo(toClose)
	}

	h.mu.Lock()
	if h.rep == nil {
		rep, err := m.connect(ctx, r)
		if err != nil {
			h.mu.Unlock()
			m.release(k, h)
			return nil, nil, err
		}
		h.rep = rep
	}
	rep := h.rep
	h.mu.Unlock()
	var once sync.Once
	return rep, func() { once.Do(func() { m.release(k, h) }) }, nil
}

// specVersion identifies what a connection was made from: the location's
// spec (its status changes with every validation, which must not reconnect).
func specVersion(bsl *v1.BackupStorageLocation) string {
	b, err := json.Marshal(bsl.Spec)
	if err != nil {
		return bsl.ResourceVersion
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (m *Manager) release(k key, h *handle) {
	m.mu.Lock()
	h.users--
	var toClose repo.Repository
	switch {
	case h.users > 0:
	case h.rep == nil:
		// Opening failed, or an idle close: the next caller opens it anew.
		if m.repos[k] == h {
			delete(m.repos, k)
		}
		delete(m.stale, h)
	case h.stale && m.stale[h]:
		delete(m.stale, h)
		toClose = h.rep
	case m.repos[k] == h:
		if d := m.idleTimeout(); d > 0 {
			h.stopIdle()
			gen := h.idleGen
			h.idle = time.AfterFunc(d, func() { m.closeIdle(k, h, gen) })
		}
	}
	m.mu.Unlock()
	if toClose != nil {
		m.closeRepo(toClose)
	}
}

func (m *Manager) idleTimeout() time.Duration {
	if m.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return m.IdleTimeout
}

// stopIdle cancels the handle's idle close (m.mu held).
func (h *handle) stopIdle() {
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.idleGen++
}

// closeIdle closes a repository its idle timer found unused, unless a
// caller took it since. Its cache goes too (kopia's caches are up to
// 5000 MiB a repository), unless a replaced connection of the same
// repository still uses the directory.
func (m *Manager) closeIdle(k key, h *handle, gen uint64) {
	m.mu.Lock()
	if m.repos[k] != h || h.users > 0 || h.idleGen != gen || h.rep == nil {
		m.mu.Unlock()
		return
	}
	// Held by the closer: a caller arriving now waits for the close on
	// h.mu, then connects afresh.
	h.users++
	h.idle = nil
	removeCache := true
	for s := range m.stale {
		if s.dir == h.dir {
			removeCache = false
		}
	}
	m.mu.Unlock()
	h.mu.Lock()
	if h.rep != nil {
		m.closeRepo(h.rep)
		h.rep = nil
		if removeCache {
			if err := os.RemoveAll(h.dir); err != nil {
				m.log().Warn("removing an idle repository's cache", "dir", h.dir, "error", err)
			}
		}
		m.log().Info("closed an idle file-system backup repository", "location", k.location, "volumeNamespace", k.namespace, "idleFor", m.idleTimeout())
	}
	h.mu.Unlock()
	m.release(k, h)
}

func (m *Manager) closeRepo(rep repo.Repository) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rep.Close(ctx); err != nil {
		m.log().Warn("closing a file-system backup repository", "error", err)
	}
}

// Close closes every open repository. Callers must be done with them.
func (m *Manager) Close(ctx context.Context) error {
	type open struct {
		what string
		h    *handle
	}
	var all []open
	m.mu.Lock()
	for k, h := range m.repos {
		h.stopIdle()
		all = append(all, open{fmt.Sprintf("repository %s/%s", k.location, k.namespace), h})
		delete(m.repos, k)
	}
	for h := range m.stale {
		all = append(all, open{"a replaced repository connection", h})
		delete(m.stale, h)
	}
	m.mu.Unlock()
	// h.mu: an idle close under way finishes first, and nothing is
	// closed twice.
	var errs []error
	for _, o := range all {
		o.h.mu.Lock()
		if o.h.rep != nil {
			if err := o.h.rep.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing %s: %w", o.what, err))
			}
			o.h.rep = nil
		}
		o.h.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (m *Manager) dir(r podvolume.Repository) string {
	return filepath.Join(m.WorkDir, "kopia", r.Location.Namespace+"-"+r.Location.Name, r.VolumeNamespace)
}

// connect connects to the repository afresh (config file and cache under
// the work directory) and opens it.
func (m *Manager) connect(ctx context.Context, r podvolume.Repository) (repo.Repository, error) {
	ctx = WithKopiaLog(ctx, m.Log)
	password, err := readPassword(ctx, m.Secrets, m.Namespace)
	if err != nil {
		return nil, err
	}
	st, err := m.storage(ctx, r, false)
	if err != nil {
		if r.Location.Spec.Provider == "lifeboat.io/filesystem" && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, err
	}
	defer st.Close(ctx)
	dir := m.dir(r)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("repository work directory: %w", err)
	}
	configFile := filepath.Join(dir, "repository.config")
	// Velero's split of the cache: 80% data, 20% metadata, soft limits at
	// 80% of the hard ones.
	data, meta := int64(defaultCacheLimit/5*4), int64(defaultCacheLimit/5)
	opts := &repo.ConnectOptions{
		ClientOptions: repo.ClientOptions{Hostname: Hostname, Username: UserName, Description: connectDesc},
		CachingOptions: content.CachingOptions{
			CacheDirectory:              filepath.Join(dir, "cache"),
			ContentCacheSizeBytes:       data / 5 * 4,
			ContentCacheSizeLimitBytes:  data,
			MetadataCacheSizeBytes:      meta / 5 * 4,
			MetadataCacheSizeLimitBytes: meta,
			MaxListCacheDuration:        content.DurationSeconds(30 * time.Second),
		},
	}
	// kopia's repo.Connect writes the config file, then opens the
	// repository to check the password and closes it: a second key
	// derivation (scrypt) and index read before the Open that follows.
	// Writing the same config file and opening once checks the same.
	var fb bytesOutput
	if err := st.GetBlob(ctx, format.KopiaRepositoryBlobID, 0, -1, &fb); err != nil {
		if errors.Is(err, blob.ErrBlobNotFound) {
			return nil, m.explain(r, repo.ErrRepositoryNotInitialized)
		}
		return nil, m.explain(r, fmt.Errorf("reading the repository's format blob: %w", err))
	}
	if err := writeLocalConfig(ctx, configFile, st, opts); err != nil {
		return nil, err
	}
	rep, err := repo.Open(ctx, configFile, password, &repo.Options{})
	if err != nil {
		return nil, m.explain(r, err)
	}
	return rep, nil
}

// writeLocalConfig writes the connection's config file as repo.Connect
// writes it (storage, client options with kopia's defaults, caching with
// an absolute cache directory), replacing one left from an earlier
// connection, which may name other storage settings.
func writeLocalConfig(ctx context.Context, configFile string, st blob.Storage, opts *repo.ConnectOptions) error {
	ci := st.ConnectionInfo()
	caching := opts.CachingOptions
	abs, err := filepath.Abs(caching.CacheDirectory)
	if err != nil {
		return fmt.Errorf("repository cache directory: %w", err)
	}
	caching.CacheDirectory = abs
	lc := repo.LocalConfig{
		Storage:       &ci,
		Caching:       &caching,
		ClientOptions: opts.ClientOptions.ApplyDefaults(ctx, "Repository in "+st.DisplayName()),
	}
	data, err := json.MarshalIndent(lc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the repository's connection config: %w", err)
	}
	// The config holds the storage's credentials.
	if err := os.WriteFile(configFile, data, 0o600); err != nil {
		return fmt.Errorf("writing the repository's connection config: %w", err)
	}
	return nil
}

func (m *Manager) explain(r podvolume.Repository, err error) error {
	where := fmt.Sprintf("repository of namespace %q in BackupStorageLocation %q", r.VolumeNamespace, r.Location.Name)
	switch {
	case errors.Is(err, repo.ErrInvalidPassword):
		return fmt.Errorf("%s: the password in secret %s/%s (key %q) does not open it: %w", where, m.Namespace, PasswordSecretName, PasswordSecretKey, err)
	case errors.Is(err, repo.ErrRepositoryNotInitialized):
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// RunMaintenance runs the maintenance kopia's schedule says is due (quick
// or full), as Velero's maintenance job does.
func (m *Manager) RunMaintenance(ctx context.Context, r podvolume.Repository) error {
	return m.Maintain(ctx, r, maintenance.ModeAuto)
}

// Maintain runs kopia's maintenance on the repository as Velero does:
// kopia decides between quick and full by the repository's schedule
// (mode auto), or the mode asked for.
func (m *Manager) Maintain(ctx context.Context, r podvolume.Repository, mode maintenance.Mode) error {
	ctx = WithKopiaLog(ctx, m.Log)
	rep, release, err := m.Open(ctx, r)
	if err != nil {
		return err
	}
	defer release()
	dr, ok := rep.(repo.DirectRepository)
	if !ok {
		return errors.New("maintenance needs a direct repository connection")
	}
	err = repo.DirectWriteSession(ctx, dr, repo.WriteSessionOptions{Purpose: maintenanceDesc}, func(ctx context.Context, w repo.DirectRepositoryWriter) error {
		return snapshotmaintenance.Run(ctx, w, mode, false, maintenance.SafetyFull)
	})
	if err != nil {
		return fmt.Errorf("maintenance (%s) of repository of namespace %q in BackupStorageLocation %q: %w", mode, r.VolumeNamespace, r.Location.Name, err)
	}
	return nil
}

func (m *Manager) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// bytesOutput collects a blob's bytes (blob.OutputBuffer).
type bytesOutput struct{ bytes.Buffer }

func (b *bytesOutput) Length() int { return b.Len() }

var _ io.Writer = (*bytesOutput)(nil)

// sliceBytes is a blob's content to write (blob.Bytes).
type sliceBytes []byte

func gatherBytes(b []byte) blob.Bytes { return sliceBytes(b) }

func (s sliceBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(s)
	return int64(n), err
}

func (s sliceBytes) Length() int { return len(s) }

func (s sliceBytes) Reader() io.ReadSeekCloser { return nopCloser{bytes.NewReader(s)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
