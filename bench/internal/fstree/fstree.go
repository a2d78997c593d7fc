// Package fstree writes the file-system backup benchmark's volume: a
// deterministic tree of mixed files that looks, to a compressor and a
// deduplicating uploader, like a real application volume.
//
// Of the requested bytes:
//
//   - 30 % are many small files, 256 B to 64 KiB (log-uniform, about
//     12 KiB on average), 100 to a directory, two levels deep; 70 % of
//     them are text (log lines: timestamps, levels, messages, key=value
//     fields with numbers), 30 % random bytes (thumbnails, compressed
//     blobs);
//   - 10 % are medium files, 256 KiB to 4 MiB, half text, half "pages";
//   - 60 % are a few large files (at least two, at most 128 MiB each),
//     alternately pages (a database's files: 8 KiB pages, each 4 KiB of
//     random bytes and 4 KiB of text) and random (media, archives).
//
// zstd at its default level stores such a tree in about 60 % of its size.
// The same seed and size always give the same tree; no two files and no
// two large runs of bytes are the same, so deduplication finds nothing
// within one tree.
package fstree

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

const (
	smallShare  = 0.30
	mediumShare = 0.10
	minSmall    = 256
	maxSmall    = 64 << 10
	minMedium   = 256 << 10
	maxMedium   = 4 << 20
	maxLarge    = 128 << 20
	perDir      = 100
	dirsPerDir  = 100
	pageSize    = 8 << 10
)

// Stats is what Generate wrote.
type Stats struct {
	Files int   `json:"files"`
	Dirs  int   `json:"dirs"`
	Bytes int64 `json:"bytes"`
	// SmallFiles, MediumFiles and LargeFiles count the files of each kind.
	SmallFiles  int `json:"smallFiles"`
	MediumFiles int `json:"mediumFiles"`
	LargeFiles  int `json:"largeFiles"`
}

type kind int

const (
	text kind = iota
	random
	pages
)

// Generate writes a tree of total bytes (within one small file's size)
// under dir, which must exist, from seed.
func Generate(dir string, total int64, seed uint64) (Stats, error) {
	if total <= 0 {
		return Stats{}, fmt.Errorf("tree size must be positive, got %d", total)
	}
	g := &gen{rng: rand.New(rand.NewPCG(seed, 0x5eed)), dir: dir}
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	g.noise = rand.NewChaCha8(s)
	g.buf = bufio.NewWriterSize(nil, 256<<10)

	smallBytes := int64(float64(total) * smallShare)
	mediumBytes := int64(float64(total) * mediumShare)
	largeBytes := total - smallBytes - mediumBytes

	// Large files first in the listing: they are what a reader streams.
	nLarge := max(2, int((largeBytes+maxLarge-1)/maxLarge))
	if err := g.mkdir("large"); err != nil {
		return g.st, err
	}
	for i := range nLarge {
		size := largeBytes / int64(nLarge)
		if i == nLarge-1 {
			size = largeBytes - size*int64(nLarge-1)
		}
		k := pages
		if i%2 == 1 {
			k = random
		}
		if err := g.file(filepath.Join("large", fmt.Sprintf("data-%02d.bin", i)), size, k); err != nil {
			return g.st, err
		}
		g.st.LargeFiles++
	}

	if err := g.mkdir("medium"); err != nil {
		return g.st, err
	}
	for i := 0; mediumBytes > 0; i++ {
		size := min(g.logUniform(minMedium, maxMedium), mediumBytes)
		k := text
		if i%2 == 1 {
			k = pages
		}
		if err := g.file(filepath.Join("medium", fmt.Sprintf("part-%04d.dat", i)), size, k); err != nil {
			return g.st, err
		}
		mediumBytes -= size
		g.st.MediumFiles++
	}

	for i := 0; smallBytes > 0; i++ {
		d := filepath.Join("small", fmt.Sprintf("d%03d", i/perDir/dirsPerDir), fmt.Sprintf("d%03d", i/perDir%dirsPerDir))
		if i%perDir == 0 {
			if err := g.mkdir(d); err != nil {
				return g.st, err
			}
		}
		size := min(g.logUniform(minSmall, maxSmall), smallBytes)
		k, ext := text, ".log"
		if g.rng.IntN(10) < 3 {
			k, ext = random, ".bin"
		}
		if err := g.file(filepath.Join(d, fmt.Sprintf("f%05d%s", i, ext)), size, k); err != nil {
			return g.st, err
		}
		smallBytes -= size
		g.st.SmallFiles++
	}
	return g.st, nil
}

type gen struct {
	rng   *rand.Rand
	noise *rand.ChaCha8
	dir   string
	buf   *bufio.Writer
	st    Stats
	// clock is the text's timestamp, advancing line by line.
	clock int64
	line  []byte
}

func (g *gen) logUniform(lo, hi int64) int64 {
	return int64(math.Exp(math.Log(float64(lo)) + g.rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
}

func (g *gen) mkdir(rel string) error {
	if err := os.MkdirAll(filepath.Join(g.dir, rel), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", rel, err)
	}
	g.st.Dirs++
	return nil
}

func (g *gen) file(rel string, size int64, k kind) error {
	f, err := os.Create(filepath.Join(g.dir, rel))
	if err != nil {
		return fmt.Errorf("creating %s: %w", rel, err)
	}
	g.buf.Reset(f)
	switch k {
	case text:
		err = g.text(size)
	case random:
		err = g.random(size)
	case pages:
		for left := size; left > 0 && err == nil; left -= pageSize {
			half := min(left, pageSize/2)
			if err = g.random(half); err == nil {
				err = g.text(min(left-half, pageSize/2))
			}
		}
	}
	if err == nil {
		err = g.buf.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", rel, err)
	}
	g.st.Files++
	g.st.Bytes += size
	return nil
}

func (g *gen) random(n int64) error {
	var chunk [32 << 10]byte
	for n > 0 {
		b := chunk[:min(n, int64(len(chunk)))]
		_, _ = g.noise.Read(b)
		if _, err := g.buf.Write(b); err != nil {
			return err
		}
		n -= int64(len(b))
	}
	return nil
}

var (
	levels    = []string{"INFO ", "INFO ", "INFO ", "DEBUG", "WARN ", "ERROR"}
	messages  = []string{"request handled", "cache miss", "connection opened", "connection closed", "retrying after timeout", "job finished", "job started", "user logged in", "token refreshed", "slow query", "queue drained", "config reloaded", "upstream returned an error", "checkpoint written", "compaction done"}
	fieldKeys = []string{"user", "path", "status", "bytes", "duration_ms", "id", "shard", "attempt", "region", "trace"}
	words     = []string{"alice", "bob", "carol", "dave", "eve", "/api/v1/users", "/api/v1/orders", "/healthz", "/metrics", "eu-west-1", "us-east-2", "ap-south-1", "primary", "replica", "batch", "stream"}
)

// text writes log lines; the last one is cut at n.
func (g *gen) text(n int64) error {
	for n > 0 {
		l := g.logLine()
		if int64(len(l)) > n {
			l = l[:n]
		}
		if _, err := g.buf.Write(l); err != nil {
			return err
		}
		n -= int64(len(l))
	}
	return nil
}

func (g *gen) logLine() []byte {
	g.clock += 1 + g.rng.Int64N(5000)
	b := g.line[:0]
	b = strconv.AppendInt(b, 1_780_000_000_000+g.clock, 10)
	b = append(b, ' ')
	b = append(b, levels[g.rng.IntN(len(levels))]...)
	b = append(b, ' ')
	b = append(b, messages[g.rng.IntN(len(messages))]...)
	for range 2 + g.rng.IntN(4) {
		b = append(b, ' ')
		b = append(b, fieldKeys[g.rng.IntN(len(fieldKeys))]...)
		b = append(b, '=')
		if g.rng.IntN(2) == 0 {
			b = append(b, words[g.rng.IntN(len(words))]...)
		} else {
			b = strconv.AppendUint(b, g.rng.Uint64N(1_000_000), 10)
		}
	}
	b = append(b, '\n')
	g.line = b
	return b
}
