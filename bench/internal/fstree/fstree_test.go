package fstree

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// digest maps every file under dir to its size and checksum.
func digest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateIsDeterministicMixedAndOfTheSize(t *testing.T) {
	const total = 24 << 20
	a, b := t.TempDir(), t.TempDir()
	st, err := Generate(a, total, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(b, total, 7); err != nil {
		t.Fatal(err)
	}
	if st.Bytes != total {
		t.Errorf("wrote %d bytes, want %d", st.Bytes, total)
	}
	if st.SmallFiles < 300 || st.MediumFiles < 1 || st.LargeFiles != 2 || st.Files != st.SmallFiles+st.MediumFiles+st.LargeFiles {
		t.Errorf("stats %+v: want hundreds of small files, medium ones, two large", st)
	}
	da, db := digest(t, a), digest(t, b)
	if len(da) != st.Files || len(db) != len(da) {
		t.Fatalf("%d and %d files on disk, stats say %d", len(da), len(db), st.Files)
	}
	seen := map[[32]byte]string{}
	for p, sum := range da {
		if db[p] != sum {
			t.Errorf("%s differs between two trees of the same seed", p)
		}
		if q, dup := seen[sum]; dup {
			t.Errorf("%s and %s have the same content", p, q)
		}
		seen[sum] = p
	}
	other := t.TempDir()
	if _, err := Generate(other, total, 8); err != nil {
		t.Fatal(err)
	}
	for p, sum := range digest(t, other) {
		if da[p] == sum {
			t.Errorf("%s is the same under another seed", p)
		}
	}

	// Partly compressible: zstd keeps between 40 % and 80 % of it.
	var stored int
	enc, _ := zstd.NewWriter(nil)
	for p := range da {
		data, err := os.ReadFile(filepath.Join(a, p))
		if err != nil {
			t.Fatal(err)
		}
		stored += len(enc.EncodeAll(data, nil))
	}
	if r := float64(stored) / total; r < 0.4 || r > 0.8 {
		t.Errorf("zstd keeps %.2f of the tree, want 0.4-0.8", r)
	}
	t.Logf("%+v; zstd keeps %.2f", st, float64(stored)/total)
}

func TestGenerateRefusesNothing(t *testing.T) {
	if _, err := Generate(t.TempDir(), 0, 1); err == nil || !bytes.Contains([]byte(err.Error()), []byte("positive")) {
		t.Fatalf("Generate(0) = %v, want an error saying the size must be positive", err)
	}
}
