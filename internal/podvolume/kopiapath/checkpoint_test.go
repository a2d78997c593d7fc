package kopiapath

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/upload"

	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// stallAfter makes Backup read the volume through a wrapper whose files
// give their first n bytes and then block until the upload's context ends
// or release is closed: an upload that stays in progress as long as the
// test wants, without a volume big enough to take that long.
func stallAfter(t *testing.T, n int64) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	orig := sourceEntry
	sourceEntry = func(path string) (fs.Entry, error) {
		e, err := orig(path)
		if err != nil {
			return nil, err
		}
		return stallEntry(e, n, ch), nil
	}
	t.Cleanup(func() { release(); sourceEntry = orig })
	return release
}

func stallEntry(e fs.Entry, n int64, release <-chan struct{}) fs.Entry {
	switch e := e.(type) {
	case fs.Directory:
		return &stallDir{Directory: e, n: n, release: release}
	case fs.File:
		return &stallFile{File: e, n: n, release: release}
	}
	return e
}

type stallDir struct {
	fs.Directory
	n       int64
	release <-chan struct{}
}

func (d *stallDir) Child(ctx context.Context, name string) (fs.Entry, error) {
	e, err := d.Directory.Child(ctx, name)
	if err != nil {
		return nil, err // kopia tells a missing entry by its error
	}
	return stallEntry(e, d.n, d.release), nil
}

func (d *stallDir) Iterate(ctx context.Context) (fs.DirectoryIterator, error) {
	it, err := d.Directory.Iterate(ctx)
	if err != nil {
		return nil, err
	}
	return &stallIter{DirectoryIterator: it, d: d}, nil
}

type stallIter struct {
	fs.DirectoryIterator
	d *stallDir
}

func (i *stallIter) Next(ctx context.Context) (fs.Entry, error) {
	e, err := i.DirectoryIterator.Next(ctx)
	if e == nil || err != nil {
		return e, err
	}
	return stallEntry(e, i.d.n, i.d.release), nil
}

type stallFile struct {
	fs.File
	n       int64
	release <-chan struct{}
}

func (f *stallFile) Open(ctx context.Context) (fs.Reader, error) {
	r, err := f.File.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &stallReader{Reader: r, ctx: ctx, left: f.n, release: f.release}, nil
}

type stallReader struct {
	fs.Reader
	ctx     context.Context
	left    int64
	release <-chan struct{}
}

func (r *stallReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		select {
		case <-r.ctx.Done():
			return 0, fmt.Errorf("reading the volume: %w", r.ctx.Err())
		case <-r.release:
			return 0, errors.New("reading the volume: the disk went away")
		}
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.Reader.Read(p)
	r.left -= int64(n)
	return n, err // io.EOF must stay io.EOF
}

// snapshotsTagged lists the snapshot manifests tagged with the backup's UID,
// as a process that opened the repository afresh sees them.
func snapshotsTagged(t *testing.T, f *fixture, uid string) []*snapshot.Manifest {
	t.Helper()
	rep, release, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := rep.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	ids, err := snapshot.ListSnapshotManifests(t.Context(), rep, nil, map[string]string{"backup-uid": uid})
	if err != nil {
		t.Fatal(err)
	}
	mans, err := snapshot.LoadSnapshots(t.Context(), rep, ids)
	if err != nil {
		t.Fatal(err)
	}
	return mans
}

// A long upload writes checkpoint snapshots (kopia's, every
// CheckpointInterval). One that then fails leaves them in the repository:
// they carry the final snapshot's tags, so they name their backup, are
// never taken as the parent of an incremental backup, and ForgetBackup
// removes them with the backup; another backup's snapshot stays.
func TestCheckpointOfAFailedUploadCarriesTheBackupsTagsAndIsForgotten(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	c := passwordClient(t, repository.DefaultPassword)
	f := newFixture(t, bsl, nil, c)

	other, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: volume(t), Tags: tags("other")})
	if err != nil {
		t.Fatal(err)
	}

	src := t.TempDir()
	data := make([]byte, 48<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Enough for kopia to have stored several chunks, which a checkpoint
	// needs; the rest never comes.
	release := stallAfter(t, 24<<20)
	f.dp.CheckpointInterval = 20 * time.Millisecond

	observer := newFixture(t, bsl, nil, c)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		res podvolume.BackupResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.dp.Backup(ctx, podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("ckpt")})
		done <- result{res, err}
	}()
	// The upload ends before the test does, whichever way it ends: the
	// repositories and directories it uses go in the cleanups.
	var (
		stopOnce sync.Once
		r        result
	)
	stop := func() result {
		stopOnce.Do(func() { cancel(); release(); r = <-done })
		return r
	}
	t.Cleanup(func() { stop() })
	var checkpoints []*snapshot.Manifest
	deadline := time.Now().Add(time.Minute)
	for len(checkpoints) == 0 {
		select {
		case r := <-done:
			done <- r
			t.Fatalf("the upload ended before any checkpoint: %+v, %v", r.res, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint tagged with the backup's UID after a minute of a stalled upload")
		}
		checkpoints = snapshotsTagged(t, observer, "uid-ckpt")
	}
	r = stop()
	if !errors.Is(r.err, context.Canceled) || r.res.SnapshotID != "" {
		t.Fatalf("the stalled, cancelled backup returned %+v, %v; want no snapshot and context.Canceled", r.res, r.err)
	}

	want := maps.Clone(tags("ckpt"))
	want[tagRequester], want[tagUploader] = Requester, UploaderType
	left := snapshotsTagged(t, observer, "uid-ckpt")
	if len(left) == 0 {
		t.Fatal("the failed upload's checkpoints are gone: nothing to test forgetting on")
	}
	for _, m := range left {
		if m.IncompleteReason != upload.IncompleteReasonCheckpoint {
			t.Errorf("snapshot %s of the failed upload: incomplete reason %q, want %q (no complete snapshot may exist)", m.ID, m.IncompleteReason, upload.IncompleteReasonCheckpoint)
		}
		if !maps.Equal(m.Tags, want) {
			t.Errorf("checkpoint %s tags %v, want the final snapshot's %v", m.ID, m.Tags, want)
		}
		if m.Source.Path != SourcePath(tags("ckpt"), "") {
			t.Errorf("checkpoint %s source %v", m.ID, m.Source)
		}
	}

	forgotten, err := f.dp.ForgetBackup(t.Context(), f.repo, "uid-ckpt")
	if err != nil {
		t.Fatalf("ForgetBackup: %v", err)
	}
	var wantIDs []string
	for _, m := range left {
		wantIDs = append(wantIDs, string(m.ID))
	}
	slices.Sort(wantIDs)
	slices.Sort(forgotten)
	if !slices.Equal(forgotten, wantIDs) {
		t.Errorf("ForgetBackup forgot %v, want the checkpoints %v", forgotten, wantIDs)
	}
	if got := snapshotsTagged(t, observer, "uid-ckpt"); len(got) != 0 {
		t.Errorf("%d snapshots of the backup left after ForgetBackup", len(got))
	}
	if got := snapshotsTagged(t, observer, "uid-other"); len(got) != 1 || string(got[0].ID) != other.SnapshotID {
		t.Errorf("another backup's snapshots after ForgetBackup: %v, want only %s", got, other.SnapshotID)
	}
	// Again: nothing left, nothing to do.
	if again, err := f.dp.ForgetBackup(t.Context(), f.repo, "uid-ckpt"); err != nil || len(again) != 0 {
		t.Errorf("second ForgetBackup: %v, %v; want nothing and no error", again, err)
	}
}

// ForgetBackup also forgets a complete snapshot that no PodVolumeBackup
// recorded (a node agent killed between saving it and writing its status),
// and only pod volume snapshots: another requester's of the same backup
// (Velero's data mover shares the repositories) are not this step's.
func TestForgetBackupForgetsUnrecordedSnapshotsOfPodVolumesOnly(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	src := volume(t)
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("b")})
	if err != nil {
		t.Fatal(err)
	}
	rep, release, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	man, err := snapshot.LoadSnapshot(t.Context(), rep, manifest.ID(res.SnapshotID))
	if err != nil {
		t.Fatal(err)
	}
	mover := *man
	mover.Tags = maps.Clone(man.Tags)
	mover.Tags[tagRequester] = "snapshot-data-upload-download"
	var moverID manifest.ID
	err = repo.WriteSession(t.Context(), rep, repo.WriteSessionOptions{Purpose: "test"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		var err error
		moverID, err = snapshot.SaveSnapshot(ctx, w, &mover)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	forgotten, err := f.dp.ForgetBackup(t.Context(), f.repo, "uid-b")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(forgotten, []string{res.SnapshotID}) {
		t.Errorf("forgotten %v, want the pod volume snapshot %s only", forgotten, res.SnapshotID)
	}
	if err := rep.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.LoadSnapshot(t.Context(), rep, moverID); err != nil {
		t.Errorf("the data mover's snapshot of the backup was forgotten: %v", err)
	}
}
