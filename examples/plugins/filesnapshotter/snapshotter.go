package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// DirKey is the config key naming the directory the plugin writes to.
const DirKey = "dir"

// credentialsFileKey is added by the server to the config of a location
// that has spec.credential (as Velero does): the path of a file holding
// the secret's bytes. The plugin has no cloud to log in to; it reads the
// file on every call that changes something, as a cloud client would, and
// records which credentials the call was made with.
const credentialsFileKey = "credentialsFile"

// allowedKeys are the config keys Init accepts. Anything else is a typo
// that must not be silently ignored.
var allowedKeys = []string{DirKey, credentialsFileKey}

// The subdirectories of dir, and the prefix of files still being written
// (hidden, and without the .json suffix, so a test globbing *.json never
// sees half a file).
const (
	snapshotsDir = "snapshots"
	volumesDir   = "volumes"
	tempPrefix   = ".tmp-"
)

// DeletionsFile, in dir, gets one JSON line (a Deletion) per
// DeleteSnapshot call.
const DeletionsFile = "deletions.jsonl"

// VolumeType is what GetVolumeInfo reports for every volume.
const VolumeType = "file"

// Credentials say which credentials a call was made with: the file Init
// was given as credentialsFile, and the SHA-256 of what the call read from
// it (a digest, so the secret itself is not copied into the records).
type Credentials struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// Snapshot is the content of <dir>/snapshots/<SnapshotID>.json.
type Snapshot struct {
	SnapshotID string            `json:"snapshotID"`
	VolumeID   string            `json:"volumeID"`
	VolumeAZ   string            `json:"volumeAZ"`
	Tags       map[string]string `json:"tags"`
	CreatedAt  time.Time         `json:"createdAt"`
	// Credentials is absent when Init got no credentialsFile.
	Credentials *Credentials `json:"credentials,omitempty"`
}

// Deletion is one line of <dir>/deletions.jsonl: a DeleteSnapshot call.
type Deletion struct {
	SnapshotID string `json:"snapshotID"`
	// Existed says whether the snapshot's file was there to remove.
	Existed     bool         `json:"existed"`
	Credentials *Credentials `json:"credentials,omitempty"`
	DeletedAt   time.Time    `json:"deletedAt"`
}

// Volume is the content of <dir>/volumes/<VolumeID>.json: a volume
// "created" from a snapshot by a restore.
type Volume struct {
	VolumeID   string `json:"volumeID"`
	SnapshotID string `json:"snapshotID"`
	// SourceVolumeID is the volume the snapshot was taken of.
	SourceVolumeID string    `json:"sourceVolumeID"`
	VolumeType     string    `json:"volumeType"`
	VolumeAZ       string    `json:"volumeAZ"`
	IOPS           *int64    `json:"iops"`
	CreatedAt      time.Time `json:"createdAt"`
	// Credentials is absent when Init got no credentialsFile.
	Credentials *Credentials `json:"credentials,omitempty"`
}

// fileSnapshotter keeps snapshot <id> as the file
// <dir>/snapshots/<id>.json. Every file access goes through an os.Root
// opened at dir, which refuses paths that leave it, symlinks included; ids
// are also checked up front so the error says what is wrong with them.
//
// One mutex serializes every call: the work is a few small file
// operations, and it makes picking a free name and renaming into it one
// step, and a second Init safe against calls in flight.
type fileSnapshotter struct {
	log *slog.Logger
	now func() time.Time // time.Now unless a test sets it

	mu        sync.Mutex
	dir       string   // absolute, cleaned
	root      *os.Root // opened by Init
	credsFile string   // config key credentialsFile; "" for none
}

func (s *fileSnapshotter) logger() *slog.Logger {
	if s.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.log
}

func (s *fileSnapshotter) clock() time.Time {
	if s.now != nil {
		return s.now().UTC()
	}
	return time.Now().UTC()
}

// Init takes the location's config: "dir", an absolute directory, created
// with its snapshots and volumes subdirectories if missing, and
// "credentialsFile", when given, a file it must be able to read.
func (s *fileSnapshotter) Init(config map[string]string) error {
	var unknown []string
	for k := range config {
		if !slices.Contains(allowedKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unknown config keys %q (allowed: %q)", unknown, allowedKeys)
	}
	dir := config[DirKey]
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("config key %q must be an absolute directory, got %q", DirKey, dir)
	}
	dir = filepath.Clean(dir)
	credsFile := config[credentialsFileKey]
	if _, err := readCredentials(credsFile); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("config key %q: %w", DirKey, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("config key %q: %w", DirKey, err)
	}
	for _, sub := range []string{snapshotsDir, volumesDir} {
		if err := root.MkdirAll(sub, 0o755); err != nil {
			root.Close()
			return fmt.Errorf("config key %q: %w", DirKey, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root != nil {
		s.root.Close()
	}
	s.dir, s.root, s.credsFile = dir, root, credsFile
	s.logger().Info("keeping snapshots in a directory", "dir", dir, "credentialsFile", credsFile)
	return nil
}

// readCredentials reads the credentials file, when there is one, and says
// which credentials it holds.
func readCredentials(file string) (*Credentials, error) {
	if file == "" {
		return nil, nil
	}
	if !filepath.IsAbs(file) {
		return nil, fmt.Errorf("config key %q must be an absolute path, got %q", credentialsFileKey, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config key %q: reading the credentials: %w", credentialsFileKey, err)
	}
	sum := sha256.Sum256(data)
	return &Credentials{File: file, SHA256: hex.EncodeToString(sum[:])}, nil
}

// initialized returns the root; the caller holds s.mu.
func (s *fileSnapshotter) initialized() (*os.Root, error) {
	if s.root == nil {
		return nil, errors.New("volume snapshotter not initialized: Init was not called with a dir")
	}
	return s.root, nil
}

// checkID refuses ids that are not a plain file name: they could name a
// file outside the directory (or a file still being written).
func checkID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty %s", what)
	case id == "." || id == "..", strings.ContainsAny(id, `/\`):
		return fmt.Errorf("%s %q would leave the directory", what, id)
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("%s %q may not start with a dot", what, id)
	case strings.ContainsRune(id, 0):
		return fmt.Errorf("%s %q contains a NUL byte", what, id)
	}
	return nil
}

func snapshotPath(id string) string { return snapshotsDir + "/" + id + ".json" }
func volumePath(id string) string   { return volumesDir + "/" + id + ".json" }

// exists says whether the file p exists; the caller holds s.mu.
func exists(root *os.Root, p string) (bool, error) {
	_, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// writeJSON writes v to the file p of directory sub atomically: to a
// temporary file next to it (fsynced), then renamed into place, so a
// reader sees the whole file or none. The caller holds s.mu and has made
// sure p is free.
func writeJSON(root *os.Root, sub, p string, v any) (err error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	tmp := sub + "/" + tempPrefix + randomHex()
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmp, p); err != nil {
		return err
	}
	// Make the rename itself durable.
	if d, err := root.Open(sub); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateSnapshot records a snapshot of volumeID as
// <dir>/snapshots/snap-<16 hex digits>.json and returns its id.
func (s *fileSnapshotter) CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (string, error) {
	if volumeID == "" {
		return "", errors.New("create snapshot: empty volume ID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := s.initialized()
	if err != nil {
		return "", err
	}
	creds, err := readCredentials(s.credsFile)
	if err != nil {
		return "", fmt.Errorf("create snapshot of %q: %w", volumeID, err)
	}
	var id string
	for {
		id = "snap-" + randomHex()
		taken, err := exists(root, snapshotPath(id))
		if err != nil {
			return "", fmt.Errorf("create snapshot of %q: %w", volumeID, err)
		}
		if !taken {
			break
		}
	}
	snap := Snapshot{SnapshotID: id, VolumeID: volumeID, VolumeAZ: volumeAZ, Tags: maps.Clone(tags), CreatedAt: s.clock(), Credentials: creds}
	if snap.Tags == nil {
		snap.Tags = map[string]string{}
	}
	if err := writeJSON(root, snapshotsDir, snapshotPath(id), snap); err != nil {
		return "", fmt.Errorf("create snapshot of %q: %w", volumeID, err)
	}
	s.logger().Info("created snapshot", "snapshot", id, "volume", volumeID, "file", filepath.Join(s.dir, filepath.FromSlash(snapshotPath(id))))
	return id, nil
}

// DeleteSnapshot removes the snapshot's file. A snapshot that is already
// gone counts as deleted, as Velero requires.
func (s *fileSnapshotter) DeleteSnapshot(snapshotID string) error {
	if err := checkID("snapshot ID", snapshotID); err != nil {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := s.initialized()
	if err != nil {
		return err
	}
	creds, err := readCredentials(s.credsFile)
	if err != nil {
		return fmt.Errorf("delete snapshot %q: %w", snapshotID, err)
	}
	err = root.Remove(snapshotPath(snapshotID))
	existed := !errors.Is(err, fs.ErrNotExist)
	if err != nil && existed {
		return fmt.Errorf("delete snapshot %q: %w", snapshotID, err)
	}
	if err := appendJSONLine(root, DeletionsFile, Deletion{SnapshotID: snapshotID, Existed: existed, Credentials: creds, DeletedAt: s.clock()}); err != nil {
		return fmt.Errorf("delete snapshot %q: recording the deletion: %w", snapshotID, err)
	}
	if !existed {
		s.logger().Info("snapshot already gone", "snapshot", snapshotID)
		return nil
	}
	s.logger().Info("deleted snapshot", "snapshot", snapshotID)
	return nil
}

// appendJSONLine appends v as one line to the file p; the caller holds
// s.mu, so lines never interleave.
func appendJSONLine(root *os.Root, p string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CreateVolumeFromSnapshot records a new volume made from the snapshot as
// <dir>/volumes/restored-<snapshotID>-<n>.json (n counts from 1 per
// snapshot) and returns its id.
func (s *fileSnapshotter) CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (string, error) {
	if err := checkID("snapshot ID", snapshotID); err != nil {
		return "", fmt.Errorf("create volume from snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := s.initialized()
	if err != nil {
		return "", err
	}
	creds, err := readCredentials(s.credsFile)
	if err != nil {
		return "", fmt.Errorf("create volume from snapshot %q: %w", snapshotID, err)
	}
	data, err := root.ReadFile(snapshotPath(snapshotID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("create volume from snapshot %q: no such snapshot (no file %s)",
			snapshotID, filepath.Join(s.dir, filepath.FromSlash(snapshotPath(snapshotID))))
	}
	if err != nil {
		return "", fmt.Errorf("create volume from snapshot %q: %w", snapshotID, err)
	}
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return "", fmt.Errorf("create volume from snapshot %q: reading the snapshot's file: %w", snapshotID, err)
	}
	var id string
	for n := 1; ; n++ {
		id = fmt.Sprintf("restored-%s-%d", snapshotID, n)
		taken, err := exists(root, volumePath(id))
		if err != nil {
			return "", fmt.Errorf("create volume from snapshot %q: %w", snapshotID, err)
		}
		if !taken {
			break
		}
	}
	vol := Volume{
		VolumeID: id, SnapshotID: snapshotID, SourceVolumeID: snap.VolumeID,
		VolumeType: volumeType, VolumeAZ: volumeAZ, IOPS: iops, CreatedAt: s.clock(), Credentials: creds,
	}
	if err := writeJSON(root, volumesDir, volumePath(id), vol); err != nil {
		return "", fmt.Errorf("create volume from snapshot %q: %w", snapshotID, err)
	}
	s.logger().Info("created volume from snapshot", "volume", id, "snapshot", snapshotID, "sourceVolume", snap.VolumeID)
	return id, nil
}

// GetVolumeInfo reports every volume as type "file" without IOPS: the
// plugin has no real volumes to look at.
func (s *fileSnapshotter) GetVolumeInfo(volumeID, _ string) (string, *int64, error) {
	if volumeID == "" {
		return "", nil, errors.New("get volume info: empty volume ID")
	}
	return VolumeType, nil, nil
}

// The volume sources the plugin knows, in the order GetVolumeID looks for
// them: a PV has only one.
const (
	srcCSI      = "csi"
	srcHostPath = "hostPath"
	srcNFS      = "nfs"
	srcLocal    = "local"
)

// volumeSource returns the name and content of the PV's volume source
// among those the plugin knows, or "" if it has none of them.
func volumeSource(obj map[string]any) (string, map[string]any, error) {
	if kind, _ := obj["kind"].(string); kind != "" && kind != "PersistentVolume" {
		return "", nil, fmt.Errorf("%s %q is not a PersistentVolume", kind, name(obj))
	}
	for _, src := range []string{srcCSI, srcHostPath, srcNFS, srcLocal} {
		v, found, err := unstructured.NestedFieldNoCopy(obj, "spec", src)
		if err != nil {
			return "", nil, fmt.Errorf("PersistentVolume %q: %w", name(obj), err)
		}
		if !found || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("PersistentVolume %q: spec.%s is a %T, not an object", name(obj), src, v)
		}
		return src, m, nil
	}
	return "", nil, nil
}

func name(obj map[string]any) string {
	n, _, _ := unstructured.NestedString(obj, "metadata", "name")
	return n
}

// str reads a string field of a volume source; missing is "".
func str(obj map[string]any, src string, m map[string]any, field string) (string, error) {
	v, _, err := unstructured.NestedString(m, field)
	if err != nil {
		return "", fmt.Errorf("PersistentVolume %q: spec.%s.%s: %w", name(obj), src, field, err)
	}
	return v, nil
}

// GetVolumeID returns the PV's volume identity: spec.csi.volumeHandle,
// spec.hostPath.path, spec.nfs.server + ":" + spec.nfs.path, or
// spec.local.path. A PV with none of these (or with an empty one) gives "",
// which tells the server this plugin cannot snapshot it.
func (s *fileSnapshotter) GetVolumeID(pv runtime.Unstructured) (string, error) {
	if pv == nil {
		return "", errors.New("get volume ID: no persistent volume")
	}
	obj := pv.UnstructuredContent()
	src, m, err := volumeSource(obj)
	if err != nil || src == "" {
		return "", err
	}
	switch src {
	case srcCSI:
		return str(obj, src, m, "volumeHandle")
	case srcNFS:
		server, err := str(obj, src, m, "server")
		if err != nil {
			return "", err
		}
		path, err := str(obj, src, m, "path")
		if err != nil || server == "" || path == "" {
			return "", err
		}
		return server + ":" + path, nil
	default: // hostPath, local
		return str(obj, src, m, "path")
	}
}

// SetVolumeID returns a copy of the PV with volumeID written into the field
// GetVolumeID reads. An NFS id is split at the ":" before the path
// ("fd00::1:/export" is server fd00::1, path /export); an NFS id without a
// ":" keeps the PV's server and becomes the path "/<id>", so that the ids
// CreateVolumeFromSnapshot returns give a valid NFS PV too.
func (s *fileSnapshotter) SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
	if pv == nil {
		return nil, errors.New("set volume ID: no persistent volume")
	}
	if volumeID == "" {
		return nil, errors.New("set volume ID: empty volume ID")
	}
	obj := runtime.DeepCopyJSON(pv.UnstructuredContent())
	src, m, err := volumeSource(obj)
	if err != nil {
		return nil, err
	}
	switch src {
	case "":
		return nil, fmt.Errorf("set volume ID: PersistentVolume %q has no csi, hostPath, nfs or local volume source", name(obj))
	case srcCSI:
		m["volumeHandle"] = volumeID
	case srcNFS:
		if !strings.Contains(volumeID, ":") {
			// An id without a server, such as the ids CreateVolumeFromSnapshot
			// returns: a volume on the same server. Kubernetes requires an
			// absolute NFS path.
			server, _ := m["server"].(string)
			if server == "" {
				return nil, fmt.Errorf("set volume ID: PersistentVolume %q is an NFS volume without a server, and %q names none", name(obj), volumeID)
			}
			m["path"] = "/" + strings.TrimPrefix(volumeID, "/")
			break
		}
		i := strings.Index(volumeID, ":/")
		if i < 0 {
			i = strings.LastIndex(volumeID, ":")
		}
		if i <= 0 || i == len(volumeID)-1 {
			return nil, fmt.Errorf("set volume ID: PersistentVolume %q is an NFS volume, and %q is not server:path", name(obj), volumeID)
		}
		m["server"], m["path"] = volumeID[:i], volumeID[i+1:]
	default: // hostPath, local
		m["path"] = volumeID
	}
	return &unstructured.Unstructured{Object: obj}, nil
}
