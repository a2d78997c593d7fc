package kopiapath

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/restore"

	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// ParallelFilesUpload reaches kopia as Velero passes it: the source's
// policy, stored in the repository, says how many files the uploader reads
// at once; without it, the node's CPUs.
func TestParallelFilesUploadSetsThePolicy(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	si := snapshot.SourceInfo{UserName: repository.UserName, Host: repository.Hostname, Path: SourcePath(tags("b"), "")}
	for _, tc := range []struct{ set, want int }{{3, 3}, {0, runtime.NumCPU()}, {-1, runtime.NumCPU()}, {17, 17}} {
		if _, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("b"), ParallelFilesUpload: tc.set}); err != nil {
			t.Fatalf("Backup: %v", err)
		}
		rep, release, err := f.mgr.Open(t.Context(), f.repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		pol, err := policy.GetDefinedPolicy(t.Context(), rep, si)
		release()
		if err != nil {
			t.Fatalf("reading the source's policy: %v", err)
		}
		if got := pol.UploadPolicy.MaxParallelFileReads; got == nil || int(*got) != tc.want {
			t.Errorf("ParallelFilesUpload %d: policy's MaxParallelFileReads %v, want %d", tc.set, got, tc.want)
		}
	}
}

// sparseVolume holds one 64 MiB file with 4 KiB of data in its middle:
// 64 MiB long, a few blocks on disk.
func sparseVolume(t *testing.T) (dir string, size int64) {
	t.Helper()
	dir = t.TempDir()
	size = 64 << 20
	fh, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := fh.Truncate(size); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i%251 + 1)
	}
	if _, err := fh.WriteAt(data, size/2); err != nil {
		t.Fatal(err)
	}
	return dir, size
}

func allocated(t *testing.T, path string) (size, onDisk int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// WriteSparseFiles makes kopia write runs of zeros as holes, as Velero's
// restore does with it; without it the file is written out whole.
func TestWriteSparseFiles(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	src, size := sparseVolume(t)
	if _, onDisk := allocated(t, filepath.Join(src, "disk.img")); onDisk > 1<<20 {
		t.Skipf("the test directory's file system does not keep holes (%d bytes allocated)", onDisk)
	}
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("sparse")})
	if err != nil {
		t.Fatal(err)
	}
	sparse, dense := t.TempDir(), t.TempDir()
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: sparse, WriteSparseFiles: true}); err != nil {
		t.Fatalf("sparse Restore: %v", err)
	}
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: dense}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(src, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{sparse, dense} {
		got, err := os.ReadFile(filepath.Join(dir, "disk.img"))
		if err != nil || string(got) != string(want) {
			t.Fatalf("restored file in %s differs from the original (%v)", dir, err)
		}
	}
	if n, onDisk := allocated(t, filepath.Join(sparse, "disk.img")); n != size || onDisk > 1<<20 {
		t.Errorf("with WriteSparseFiles: %d bytes long, %d on disk; want %d long and at most 1 MiB on disk", n, onDisk, size)
	}
	if n, onDisk := allocated(t, filepath.Join(dense, "disk.img")); n != size || onDisk < size/2 {
		t.Errorf("without WriteSparseFiles: %d bytes long, %d on disk; want %d long and written out", n, onDisk, size)
	}
}

// ParallelFilesDownload is kopia's restore parallelism, as in Velero;
// without it, the node's CPUs.
func TestParallelFilesDownloadReachesKopia(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: volume(t), Tags: tags("p")})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	orig := restoreEntry
	restoreEntry = func(ctx context.Context, rep repo.Repository, out restore.Output, root fs.Entry, opts restore.Options) (restore.Stats, error) {
		seen = append(seen, opts.Parallel)
		return orig(ctx, rep, out, root, opts)
	}
	t.Cleanup(func() { restoreEntry = orig })
	for _, n := range []int{5, 0, -2} {
		if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: t.TempDir(), ParallelFilesDownload: n}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{5, runtime.NumCPU(), runtime.NumCPU()}; len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Errorf("kopia's restore parallelism %v, want %v", seen, want)
	}
}
