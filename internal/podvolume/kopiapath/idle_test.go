package kopiapath

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kopia/kopia/snapshot"

	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// A repository no transfer has used for the idle timeout is closed, its
// cache removed, and opened again by the next transfer; one in use is
// never closed under its user, however long the transfer takes.
func TestIdleRepositoryIsClosedAndReopened(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	f.mgr.IdleTimeout = 300 * time.Millisecond
	cache := filepath.Join(f.mgr.WorkDir, "kopia", bsl.Namespace+"-"+bsl.Name, "app")

	src := volume(t)
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("b1")})
	if err != nil {
		t.Fatal(err)
	}
	held, release, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	// Held for several timeouts: still open, and shared.
	time.Sleep(1 * time.Second)
	if _, err := snapshot.ListSources(t.Context(), held); err != nil {
		t.Fatalf("a repository in use was closed: %v", err)
	}
	again, release2, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	if again != held {
		t.Errorf("a repository in use was opened a second time")
	}
	release2()
	release()
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("cache of an open repository: %v", err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(cache); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle repository's cache %s is still there after 10s", cache)
		}
		time.Sleep(50 * time.Millisecond)
	}
	reopened, release3, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	if reopened == held {
		t.Errorf("the idle repository was not closed: the same connection came back")
	}
	release3()
	// The next transfer works on the reopened repository.
	dst := t.TempDir()
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatalf("Restore after the idle close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "big.bin")); err != nil {
		t.Errorf("restored volume: %v", err)
	}
}

// A negative timeout keeps repositories open for the process's life.
func TestNegativeIdleTimeoutNeverCloses(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	f.mgr.IdleTimeout = -1
	r1, rel, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	time.Sleep(500 * time.Millisecond)
	r2, rel, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if r1 != r2 {
		t.Errorf("a repository was reopened with a negative idle timeout")
	}
}

// Callers racing the idle close never get a closed repository.
func TestIdleCloseRacesCallers(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	f.mgr.IdleTimeout = time.Millisecond
	stop := time.Now().Add(2 * time.Second)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			var err error
			for n := 0; err == nil && time.Now().Before(stop); n++ {
				r, release, oerr := f.mgr.Open(t.Context(), f.repo)
				if oerr != nil {
					err = oerr
					break
				}
				_, err = snapshot.ListSources(t.Context(), r)
				release()
				time.Sleep(time.Duration((n+i)%3) * time.Millisecond)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("a caller racing the idle close: %v", err)
		}
	}
}
