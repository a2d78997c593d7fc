package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var testTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newSnapshotter(t *testing.T) (*fileSnapshotter, string) {
	t.Helper()
	dir := t.TempDir()
	s := &fileSnapshotter{now: func() time.Time { return testTime }}
	if err := s.Init(map[string]string{DirKey: dir}); err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// files lists the names in dir/sub, sorted.
func files(t *testing.T, dir, sub string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func TestInitRefusesBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config map[string]string
		want   string // in the error
	}{
		{map[string]string{}, `"dir" must be an absolute directory`},
		{map[string]string{DirKey: "relative/dir"}, `"dir" must be an absolute directory, got "relative/dir"`},
		{map[string]string{DirKey: file}, `config key "dir"`},
		{map[string]string{DirKey: t.TempDir(), "dri": "typo", "region": "x"}, `unknown config keys ["dri" "region"]`},
		{map[string]string{DirKey: t.TempDir(), credentialsFileKey: "creds"}, `"credentialsFile" must be an absolute path, got "creds"`},
		{map[string]string{DirKey: t.TempDir(), credentialsFileKey: "/nonexistent/creds"}, `"credentialsFile": reading the credentials: open /nonexistent/creds`},
	} {
		err := (&fileSnapshotter{}).Init(tc.config)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Init(%v) = %v, want an error containing %q", tc.config, err, tc.want)
		}
	}
}

// A missing dir is created with its subdirectories; the credentialsFile
// key the server adds for a location with a credential is accepted.
func TestInitCreatesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	creds := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(creds, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &fileSnapshotter{}
	if err := s.Init(map[string]string{DirKey: dir + "/", credentialsFileKey: creds}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"snapshots", "volumes"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s/%s is not a directory: %v", dir, sub, err)
		}
	}
	// A second Init (another location, or the same one again) is fine.
	if err := s.Init(map[string]string{DirKey: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot("vol", "", nil); err != nil {
		t.Fatal(err)
	}
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Every call that changes something reads the credentials file, as a cloud
// client would, and records which credentials it was made with: a test can
// tell a snapshot taken with a location's credentials from one taken
// without them.
func TestCallsRecordTheirCredentials(t *testing.T) {
	dir := t.TempDir()
	credsFile := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(credsFile, []byte("account-a"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &fileSnapshotter{now: func() time.Time { return testTime }}
	if err := s.Init(map[string]string{DirKey: dir, credentialsFileKey: credsFile}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.CreateSnapshot("vol", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Credentials{File: credsFile, SHA256: digestOf("account-a")}
	if got := readJSON[Snapshot](t, filepath.Join(dir, "snapshots", snap+".json")).Credentials; !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot records credentials %+v, want %+v", got, want)
	}
	// The file is read again on each call: new bytes are seen.
	if err := os.WriteFile(credsFile, []byte("account-b"), 0o600); err != nil {
		t.Fatal(err)
	}
	vol, err := s.CreateVolumeFromSnapshot(snap, VolumeType, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want = &Credentials{File: credsFile, SHA256: digestOf("account-b")}
	if got := readJSON[Volume](t, filepath.Join(dir, "volumes", vol+".json")).Credentials; !reflect.DeepEqual(got, want) {
		t.Errorf("volume records credentials %+v, want %+v", got, want)
	}
	if err := s.DeleteSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot("snap-never-was"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, DeletionsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%s holds %d lines, want 2:\n%s", DeletionsFile, len(lines), b)
	}
	for i, w := range []Deletion{
		{SnapshotID: snap, Existed: true, Credentials: want, DeletedAt: testTime},
		{SnapshotID: "snap-never-was", Existed: false, Credentials: want, DeletedAt: testTime},
	} {
		var got Deletion
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("deletion %d: %+v (%v), want %+v", i, got, err, w)
		}
	}

	// Credentials that went away fail the call, naming the key.
	if err := os.Remove(credsFile); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot("vol", "", nil); err == nil || !strings.Contains(err.Error(), `"credentialsFile"`) {
		t.Errorf("CreateSnapshot without its credentials file: %v", err)
	}
	if err := s.DeleteSnapshot("snap-1"); err == nil || !strings.Contains(err.Error(), `"credentialsFile"`) {
		t.Errorf("DeleteSnapshot without its credentials file: %v", err)
	}

	// Without credentialsFile nothing is recorded: the key is absent.
	plain, plainDir := newSnapshotter(t)
	id, err := plain.CreateSnapshot("vol", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(plainDir, "snapshots", id+".json")); strings.Contains(string(b), "credentials") {
		t.Errorf("a snapshot taken without credentials mentions them: %s", b)
	}
}

func TestCallsBeforeInitFail(t *testing.T) {
	s := &fileSnapshotter{}
	if _, err := s.CreateSnapshot("vol", "", nil); err == nil || !strings.Contains(err.Error(), "not initialized") {
		t.Errorf("CreateSnapshot before Init: %v", err)
	}
	if err := s.DeleteSnapshot("snap-1"); err == nil || !strings.Contains(err.Error(), "not initialized") {
		t.Errorf("DeleteSnapshot before Init: %v", err)
	}
	if _, err := s.CreateVolumeFromSnapshot("snap-1", "", "", nil); err == nil || !strings.Contains(err.Error(), "not initialized") {
		t.Errorf("CreateVolumeFromSnapshot before Init: %v", err)
	}
}

func TestCreateSnapshotWritesAFile(t *testing.T) {
	s, dir := newSnapshotter(t)
	tags := map[string]string{"velero.io/backup": "nightly", "velero.io/pv": "pv-1"}
	id, err := s.CreateSnapshot("pvc-123", "zone-a", tags)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^snap-[0-9a-f]{16}$`).MatchString(id) {
		t.Errorf("snapshot id %q is not snap-<16 hex digits>", id)
	}
	if got := files(t, dir, "snapshots"); !slices.Equal(got, []string{id + ".json"}) {
		t.Errorf("snapshots/ holds %q, want only %s.json (no temporary files)", got, id)
	}
	got := readJSON[Snapshot](t, filepath.Join(dir, "snapshots", id+".json"))
	want := Snapshot{SnapshotID: id, VolumeID: "pvc-123", VolumeAZ: "zone-a", Tags: tags, CreatedAt: testTime}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot file holds %+v, want %+v", got, want)
	}
	// The keys a test reading the file relies on (README.md).
	var raw map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "snapshots", id+".json"))
	_ = json.Unmarshal(b, &raw)
	for _, k := range []string{"snapshotID", "volumeID", "volumeAZ", "tags", "createdAt"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("snapshot file lacks key %q: %s", k, b)
		}
	}

	// The caller's map is copied; no tags are written as {}.
	tags["later"] = "x"
	id2, err := s.CreateSnapshot("pvc-123", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id {
		t.Errorf("two snapshots got the same id %q", id)
	}
	if got := readJSON[Snapshot](t, filepath.Join(dir, "snapshots", id2+".json")); got.Tags == nil || len(got.Tags) != 0 {
		t.Errorf("a snapshot without tags has tags %v, want {}", got.Tags)
	}
	if got := readJSON[Snapshot](t, filepath.Join(dir, "snapshots", id+".json")); got.Tags["later"] != "" {
		t.Errorf("the snapshot file changed with the caller's map")
	}
}

func TestCreateSnapshotOfNoVolumeFails(t *testing.T) {
	s, dir := newSnapshotter(t)
	if _, err := s.CreateSnapshot("", "zone-a", nil); err == nil {
		t.Error("CreateSnapshot of an empty volume ID succeeded")
	}
	if got := files(t, dir, "snapshots"); len(got) != 0 {
		t.Errorf("snapshots/ holds %q after a failed CreateSnapshot", got)
	}
}

func TestDeleteSnapshot(t *testing.T) {
	s, dir := newSnapshotter(t)
	keep, err := s.CreateSnapshot("vol-a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.CreateSnapshot("vol-b", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot(gone); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir, "snapshots"); !slices.Equal(got, []string{keep + ".json"}) {
		t.Errorf("after deleting %s, snapshots/ holds %q, want only %s.json", gone, got, keep)
	}
	// Deleting a snapshot that is already gone, or never existed, counts
	// as deleted.
	for _, id := range []string{gone, "snap-0000000000000000", "made-elsewhere"} {
		if err := s.DeleteSnapshot(id); err != nil {
			t.Errorf("DeleteSnapshot(%q) of a missing snapshot: %v", id, err)
		}
	}
}

// Ids that could name a file outside the directory (or a file being
// written) are refused before any file is touched.
func TestIDsEscapingTheDirectoryAreRefused(t *testing.T) {
	s, dir := newSnapshotter(t)
	// Files a bad id could reach.
	victims := []string{filepath.Join(filepath.Dir(dir), "victim.json"), filepath.Join(dir, "victim.json")}
	for _, v := range victims {
		if err := os.WriteFile(v, []byte(`{"volumeID":"v"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(victims[0]) })
	if err := os.WriteFile(filepath.Join(dir, "snapshots", ".tmp-1.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"../victim", "../../victim", "..", ".", "a/b", `..\victim`, "/etc/passwd", victims[0],
		"", ".tmp-1", "nul\x00byte",
	} {
		if err := s.DeleteSnapshot(id); err == nil {
			t.Errorf("DeleteSnapshot(%q) succeeded", id)
		}
		if _, err := s.CreateVolumeFromSnapshot(id, "", "", nil); err == nil {
			t.Errorf("CreateVolumeFromSnapshot(%q) succeeded", id)
		}
	}
	for _, v := range victims {
		if _, err := os.Stat(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	if got := files(t, dir, "volumes"); len(got) != 0 {
		t.Errorf("volumes/ holds %q", got)
	}
}

// A symlink planted in snapshots/ cannot lead out of the directory:
// os.Root refuses to follow it.
func TestSymlinkOutOfTheDirectoryIsRefused(t *testing.T) {
	s, dir := newSnapshotter(t)
	elsewhere := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(elsewhere, []byte(`{"volumeID":"secret"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "snapshots", "snap-link.json")); err != nil {
		t.Fatal(err)
	}
	if id, err := s.CreateVolumeFromSnapshot("snap-link", "", "", nil); err == nil {
		t.Errorf("read a snapshot through a symlink out of the directory: volume %q", id)
	}
	// Deleting removes the link, never what it points to.
	if err := s.DeleteSnapshot("snap-link"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("the file the symlink pointed to: %v", err)
	}
}

func TestCreateVolumeFromSnapshot(t *testing.T) {
	s, dir := newSnapshotter(t)
	snap, err := s.CreateSnapshot("/mnt/data", "zone-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	iops := int64(3000)
	first, err := s.CreateVolumeFromSnapshot(snap, "file", "zone-b", &iops)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateVolumeFromSnapshot(snap, "file", "zone-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "restored-" + snap + "-1"; first != want {
		t.Errorf("first volume is %q, want %q", first, want)
	}
	if want := "restored-" + snap + "-2"; second != want {
		t.Errorf("second volume is %q, want %q", second, want)
	}
	if got, want := files(t, dir, "volumes"), []string{first + ".json", second + ".json"}; !slices.Equal(got, want) {
		t.Errorf("volumes/ holds %q, want %q", got, want)
	}
	got := readJSON[Volume](t, filepath.Join(dir, "volumes", first+".json"))
	want := Volume{VolumeID: first, SnapshotID: snap, SourceVolumeID: "/mnt/data", VolumeType: "file", VolumeAZ: "zone-b", IOPS: &iops, CreatedAt: testTime}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("volume file holds %+v, want %+v", got, want)
	}
	if got := readJSON[Volume](t, filepath.Join(dir, "volumes", second+".json")); got.IOPS != nil {
		t.Errorf("volume created without iops records iops %d", *got.IOPS)
	}
	// The snapshot is still there.
	if got := files(t, dir, "snapshots"); !slices.Equal(got, []string{snap + ".json"}) {
		t.Errorf("snapshots/ holds %q", got)
	}
}

func TestCreateVolumeFromMissingSnapshotFails(t *testing.T) {
	s, dir := newSnapshotter(t)
	_, err := s.CreateVolumeFromSnapshot("snap-gone", "file", "", nil)
	if err == nil || !strings.Contains(err.Error(), `"snap-gone"`) || !strings.Contains(err.Error(), "no such snapshot") {
		t.Errorf("CreateVolumeFromSnapshot of a missing snapshot: %v, want an error naming it", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "snapshots", "snap-bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateVolumeFromSnapshot("snap-bad", "file", "", nil); err == nil || !strings.Contains(err.Error(), `"snap-bad"`) {
		t.Errorf("CreateVolumeFromSnapshot of a malformed snapshot file: %v", err)
	}
	if got := files(t, dir, "volumes"); len(got) != 0 {
		t.Errorf("volumes/ holds %q", got)
	}
}

// Calls at the same time (the server runs backups in parallel) never give
// two snapshots or two volumes the same id.
func TestConcurrentCallsGetDistinctIDs(t *testing.T) {
	s, dir := newSnapshotter(t)
	snap, err := s.CreateSnapshot("vol", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	snaps, vols := make([]string, n), make([]string, n)
	for i := range n {
		wg.Go(func() {
			var err error
			if snaps[i], err = s.CreateSnapshot(fmt.Sprint("vol-", i), "", nil); err != nil {
				t.Error(err)
			}
			if vols[i], err = s.CreateVolumeFromSnapshot(snap, "", "", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := files(t, dir, "snapshots"); len(got) != n+1 {
		t.Errorf("%d snapshot files, want %d", len(got), n+1)
	}
	slices.Sort(vols)
	if len(slices.Compact(vols)) != n || len(files(t, dir, "volumes")) != n {
		t.Errorf("volumes %q are not %d distinct ones", vols, n)
	}
}

func TestGetVolumeInfo(t *testing.T) {
	s := &fileSnapshotter{} // needs no Init: it touches no file
	typ, iops, err := s.GetVolumeInfo("vol-1", "zone-a")
	if err != nil || typ != "file" || iops != nil {
		t.Errorf("GetVolumeInfo = %q, %v, %v; want file, nil, nil", typ, iops, err)
	}
	if _, _, err := s.GetVolumeInfo("", ""); err == nil {
		t.Error("GetVolumeInfo of an empty volume ID succeeded")
	}
}

func pv(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "PersistentVolume",
		"metadata":   map[string]any{"name": "pv-1"},
		"spec": mergeMaps(map[string]any{
			"capacity":    map[string]any{"storage": "1Gi"},
			"accessModes": []any{"ReadWriteOnce"},
		}, spec),
	}}
}

func mergeMaps(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

var volumeSources = []struct {
	name   string
	spec   map[string]any
	id     string         // what GetVolumeID returns
	newID  string         // given to SetVolumeID
	fields map[string]any // the source after SetVolumeID(newID)
}{
	{
		name:   "csi",
		spec:   map[string]any{"csi": map[string]any{"driver": "hostpath.csi.k8s.io", "volumeHandle": "0b5c-42"}},
		id:     "0b5c-42",
		newID:  "restored-snap-1-1",
		fields: map[string]any{"driver": "hostpath.csi.k8s.io", "volumeHandle": "restored-snap-1-1"},
	},
	{
		name:   "hostPath",
		spec:   map[string]any{"hostPath": map[string]any{"path": "/mnt/data", "type": "DirectoryOrCreate"}},
		id:     "/mnt/data",
		newID:  "/mnt/restored",
		fields: map[string]any{"path": "/mnt/restored", "type": "DirectoryOrCreate"},
	},
	{
		name:   "nfs",
		spec:   map[string]any{"nfs": map[string]any{"server": "nfs.example.com", "path": "/exports/a"}},
		id:     "nfs.example.com:/exports/a",
		newID:  "10.0.0.9:/exports/b",
		fields: map[string]any{"server": "10.0.0.9", "path": "/exports/b"},
	},
	{
		name:   "nfs IPv6",
		spec:   map[string]any{"nfs": map[string]any{"server": "fd00::1", "path": "/exports/a"}},
		id:     "fd00::1:/exports/a",
		newID:  "fd00:::/b",
		fields: map[string]any{"server": "fd00::", "path": "/b"},
	},
	{
		name:   "nfs relative path",
		spec:   map[string]any{"nfs": map[string]any{"server": "nfs", "path": "exports"}},
		id:     "nfs:exports",
		newID:  "other:share",
		fields: map[string]any{"server": "other", "path": "share"},
	},
	{
		name:   "local",
		spec:   map[string]any{"local": map[string]any{"path": "/mnt/disks/ssd1"}, "nodeAffinity": map[string]any{}},
		id:     "/mnt/disks/ssd1",
		newID:  "/mnt/disks/ssd2",
		fields: map[string]any{"path": "/mnt/disks/ssd2"},
	},
}

func TestGetVolumeID(t *testing.T) {
	s := &fileSnapshotter{}
	for _, tc := range volumeSources {
		got, err := s.GetVolumeID(pv(tc.spec))
		if err != nil || got != tc.id {
			t.Errorf("%s: GetVolumeID = %q, %v; want %q", tc.name, got, err, tc.id)
		}
	}
	// Volumes it cannot snapshot give "" and no error.
	for name, spec := range map[string]map[string]any{
		"aws":            {"awsElasticBlockStore": map[string]any{"volumeID": "vol-1"}},
		"no source":      {},
		"csi, no handle": {"csi": map[string]any{"driver": "d"}},
		"nfs, no server": {"nfs": map[string]any{"path": "/x"}},
		"nfs, no path":   {"nfs": map[string]any{"server": "s"}},
		"hostPath, null": {"hostPath": nil},
	} {
		if got, err := s.GetVolumeID(pv(spec)); got != "" || err != nil {
			t.Errorf("%s: GetVolumeID = %q, %v; want \"\", nil", name, got, err)
		}
	}
	if got, err := s.GetVolumeID(&unstructured.Unstructured{Object: map[string]any{"kind": "PersistentVolume"}}); got != "" || err != nil {
		t.Errorf("PV without spec: GetVolumeID = %q, %v", got, err)
	}
	// Things that are not a well-formed PV are errors.
	notPV := pv(map[string]any{"csi": map[string]any{"volumeHandle": "h"}})
	notPV.SetKind("PersistentVolumeClaim")
	for name, obj := range map[string]*unstructured.Unstructured{
		"a PVC":                  notPV,
		"csi is a string":        pv(map[string]any{"csi": "h"}),
		"volumeHandle is a list": pv(map[string]any{"csi": map[string]any{"volumeHandle": []any{"h"}}}),
		"nfs server is a number": pv(map[string]any{"nfs": map[string]any{"server": int64(1), "path": "/x"}}),
	} {
		if got, err := s.GetVolumeID(obj); err == nil {
			t.Errorf("%s: GetVolumeID = %q, want an error", name, got)
		}
	}
	if _, err := s.GetVolumeID(nil); err == nil {
		t.Error("GetVolumeID(nil) succeeded")
	}
}

func TestSetVolumeID(t *testing.T) {
	s := &fileSnapshotter{}
	for _, tc := range volumeSources {
		in := pv(tc.spec)
		before := in.DeepCopy()
		out, err := s.SetVolumeID(in, tc.newID)
		if err != nil {
			t.Errorf("%s: SetVolumeID: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(in, before) {
			t.Errorf("%s: SetVolumeID changed its argument", tc.name)
		}
		src := strings.Fields(tc.name)[0]
		got, _, _ := unstructured.NestedMap(out.UnstructuredContent(), "spec", src)
		if !reflect.DeepEqual(got, tc.fields) {
			t.Errorf("%s: spec.%s after SetVolumeID = %v, want %v", tc.name, src, got, tc.fields)
		}
		// Everything else is left alone.
		want := before.DeepCopy()
		_ = unstructured.SetNestedMap(want.Object, tc.fields, "spec", src)
		if !reflect.DeepEqual(out.UnstructuredContent(), want.Object) {
			t.Errorf("%s: SetVolumeID returned %v, want %v", tc.name, out.UnstructuredContent(), want.Object)
		}
		if id, err := s.GetVolumeID(out); err != nil || id != tc.newID {
			t.Errorf("%s: GetVolumeID after SetVolumeID(%q) = %q, %v", tc.name, tc.newID, id, err)
		}
	}
	for name, tc := range map[string]struct {
		spec map[string]any
		id   string
	}{
		"no source": {map[string]any{"awsElasticBlockStore": map[string]any{"volumeID": "vol-1"}}, "vol-2"},
		"empty id":  {map[string]any{"csi": map[string]any{"volumeHandle": "h"}}, ""},
		"nfs id without colon, PV without server": {map[string]any{"nfs": map[string]any{"path": "/p"}}, "restored-snap-1-1"},
		"nfs id without path":                     {map[string]any{"nfs": map[string]any{"server": "s", "path": "/p"}}, "server:"},
		"nfs id without host":                     {map[string]any{"nfs": map[string]any{"server": "s", "path": "/p"}}, ":/p"},
		"csi is a string":                         {map[string]any{"csi": "h"}, "h2"},
	} {
		if out, err := s.SetVolumeID(pv(tc.spec), tc.id); err == nil {
			t.Errorf("%s: SetVolumeID = %v, want an error", name, out)
		}
	}
	// An NFS PV given an id without a server, as CreateVolumeFromSnapshot
	// returns them, stays on its server, with an absolute path as
	// Kubernetes requires.
	for _, id := range []string{"restored-snap-1-1", "/restored-snap-1-1"} {
		out, err := s.SetVolumeID(pv(map[string]any{"nfs": map[string]any{"server": "s", "path": "/p"}}), id)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedMap(out.UnstructuredContent(), "spec", "nfs")
		if want := map[string]any{"server": "s", "path": "/restored-snap-1-1"}; !reflect.DeepEqual(got, want) {
			t.Errorf("SetVolumeID(nfs PV, %q) gives spec.nfs %v, want %v", id, got, want)
		}
	}
	if _, err := s.SetVolumeID(nil, "x"); err == nil {
		t.Error("SetVolumeID(nil) succeeded")
	}
}
