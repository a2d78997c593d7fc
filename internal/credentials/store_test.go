package credentials

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	vsl = Location{Kind: SnapshotLocation, Namespace: "velero", Name: "aws-east"}
	bsl = Location{Kind: StorageLocation, Namespace: "velero", Name: "aws-east"}
	sec = Secret{Name: "cloud-credentials", Key: "cloud"}
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func TestWriteGivesAPrivateFileInAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "creds")
	s := open(t, dir)
	p, err := s.Write(vsl, sec, []byte("[default]\nkey=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != dir {
		t.Errorf("file %s is not in %s", p, dir)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "[default]\nkey=1\n" {
		t.Errorf("file holds %q, %v", got, err)
	}
	if m := mode(t, dir); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("directory mode %s, want drwx------", m)
	}
	if m := mode(t, p); !m.IsRegular() || m.Perm() != 0o600 {
		t.Errorf("file mode %s, want -rw-------", m)
	}
	// The same location and secret keep their path; new bytes replace the
	// old ones.
	p2, err := s.Write(vsl, sec, []byte("new"))
	if err != nil || p2 != p {
		t.Fatalf("second Write = %s, %v; want %s", p2, err, p)
	}
	if got, _ := os.ReadFile(p); string(got) != "new" {
		t.Errorf("after a rewrite the file holds %q", got)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q, want one file (no temporary files left)", got)
	}
}

// Names from users never reach the path: separators, dots and long names
// all give a plain file in the directory, and different locations,
// kinds, secrets or keys never share one.
func TestFileNamesAreSafeAndDistinct(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	cases := []struct {
		loc Location
		sec Secret
	}{
		{vsl, sec},
		{bsl, sec},
		{Location{SnapshotLocation, "velero", "aws"}, Secret{"east-cloud-credentials", "cloud"}},
		{Location{SnapshotLocation, "velero", "aws-east"}, Secret{"cloud-credentials", "cloud2"}},
		{Location{SnapshotLocation, "velero-aws", "east"}, sec},
		{Location{SnapshotLocation, "velero", "../../etc"}, Secret{"../passwd", "../../x"}},
		{Location{SnapshotLocation, "..", "."}, Secret{"/", "\x00"}},
		{Location{SnapshotLocation, "velero", strings.Repeat("n", 300)}, Secret{strings.Repeat("s", 300), strings.Repeat("k", 300)}},
	}
	seen := map[string]int{}
	for i, c := range cases {
		p, err := s.Write(c.loc, c.sec, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if filepath.Dir(p) != dir || strings.ContainsAny(filepath.Base(p), "/\x00") {
			t.Errorf("case %d: path %s leaves %s", i, p, dir)
		}
		if j, dup := seen[p]; dup {
			t.Errorf("cases %d and %d share %s", j, i, p)
		}
		seen[p] = i
	}
	if got := entries(t, dir); len(got) != len(cases) {
		t.Errorf("directory holds %d entries, want %d", len(got), len(cases))
	}
	if _, err := s.Write(Location{Kind: "other", Namespace: "velero", Name: "x"}, sec, nil); err == nil {
		t.Error("Write for an unknown kind of location succeeded")
	}
}

// A link planted at a credentials file's name is never written through:
// the write is refused and the link's target keeps its content.
func TestLinkAtTheFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	p, err := s.Write(vsl, sec, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(vsl, sec, []byte("secret"))
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Write over a link: %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Errorf("the link's target now holds %q", got)
	}
	if m := mode(t, p); m&fs.ModeSymlink == 0 {
		t.Errorf("%s is now %s", p, m)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q; the temporary file was left", got)
	}
	// A server that starts removes the link (never following it).
	open(t, dir)
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("after a restart the directory holds %q", got)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Errorf("the link's target now holds %q", got)
	}
}

// A link in place of the directory is refused, whatever it points at.
func TestLinkAsTheDirectoryIsRefused(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "creds")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := Open(link, nil)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Open(link to a directory) = %v, want a refusal naming the link", err)
	}
	dangling := filepath.Join(base, "dangling")
	if err := os.Symlink(filepath.Join(base, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dangling, nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Open(dangling link) = %v, want a refusal naming the link", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	if got := entries(t, target); len(got) != 0 {
		t.Errorf("the link's target holds %q", got)
	}
}

func TestExistingDirectoryModeIsFixedAndItsOldFilesRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	for _, name := range []string{"cred-vsl-left-over", ".cred-tmp-half", "README"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open(t, dir)
	if m := mode(t, dir); m.Perm() != 0o700 {
		t.Errorf("directory mode %s, want it made 0700", m)
	}
	// What a previous server left goes; what is not the store's stays.
	if got := entries(t, dir); len(got) != 1 || got[0] != "README" {
		t.Errorf("directory holds %q, want only README", got)
	}
}

func TestDirectoryOfAnotherUserIsRefused(t *testing.T) {
	// As root, a directory is given away; as anyone else, "/" is root's.
	dir, owner := "/", 0
	if os.Geteuid() == 0 {
		dir, owner = filepath.Join(t.TempDir(), "creds"), 65534
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(dir, nil)
	if want := fmt.Sprintf("owned by uid %d", owner); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open(directory of uid %d) = %v, want a refusal naming the owner", owner, err)
	}
}

func TestAFileInPlaceOfTheDirectoryIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Open(a file) = %v", err)
	}
}

// Writers of one location (in one store, or in two stores on one
// directory) never collide: every write succeeds, the file always holds one
// writer's whole content, and no temporary file is left.
func TestConcurrentWritersNeverCollide(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	b := open(t, dir)
	contents := map[string]bool{}
	for i := range 16 {
		contents[strings.Repeat(fmt.Sprintf("writer-%02d;", i), 4096)] = true
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16*20)
	var paths sync.Map
	i := 0
	for c := range contents {
		s := a
		if i%2 == 1 {
			s = b
		}
		i++
		wg.Go(func() {
			for range 20 {
				p, err := s.Write(vsl, sec, []byte(c))
				if err != nil {
					errs <- err
					return
				}
				paths.Store(p, true)
				got, err := os.ReadFile(p)
				if err != nil {
					errs <- err
					return
				}
				if !contents[string(got)] {
					errs <- fmt.Errorf("read %d bytes that no writer wrote whole", len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	paths.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("writers got %d paths, want 1", n)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q, want one file", got)
	}
}

func TestRemoveTakesEveryFileOfTheLocationOnly(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	old, err := s.Write(vsl, Secret{"old", "cloud"}, []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Write(vsl, sec, []byte("cur"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Write(bsl, sec, []byte("bsl")) // same name, other kind
	if err != nil {
		t.Fatal(err)
	}
	// The credential changed: the old secret's file goes, the current stays.
	if err := s.Remove(vsl, sec); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{old: false, cur: true, other: true} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", p, err == nil, want)
		}
	}
	// The location is gone: all its files go.
	if err := s.Remove(vsl); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(cur); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after the location went: %v", cur, err)
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("the storage location's file went with the snapshot location's: %v", err)
	}
	if err := s.Remove(vsl); err != nil {
		t.Errorf("removing the files of a location that has none: %v", err)
	}
}

func TestCloseRemovesTheFilesAndAPrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(vsl, sec, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("after Close the directory holds %q", got)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("Close removed a directory it was given: %v", err)
	}
	// A call still running when the server stops gets an error.
	if p, err := s.Write(vsl, sec, []byte("x")); err == nil {
		t.Errorf("Write after Close wrote %s", p)
	}
	if err := s.Remove(vsl); err == nil {
		t.Error("Remove after Close succeeded")
	}

	// No directory given: a fresh private one, gone after Close.
	p, err := Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, p.Dir()); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("private directory mode %s", m)
	}
	q := open(t, "")
	if q.Dir() == p.Dir() {
		t.Errorf("two stores share the private directory %s", p.Dir())
	}
	f, err := p.Write(vsl, sec, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix([]byte(f), []byte(p.Dir())) {
		t.Errorf("file %s outside %s", f, p.Dir())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("private directory after Close: %v", err)
	}
}
