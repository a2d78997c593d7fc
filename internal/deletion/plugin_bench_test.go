package deletion

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
)

// BenchmarkExternalDeleteItemAction deletes a backup of N ConfigMaps of
// about 1.5 KiB each (what bench/run.sh's deletion measurement stores)
// with bench/deleteplugin, a real plugin process that does nothing with
// an item, as the engine runs it in the server but without an API server:
// what is timed is the engine's item step and the calls over the plugin's
// stream. "floor" reads the same tarball through gzip and tar. It is a
// tool for looking at the engine's side (go test -bench, -cpuprofile);
// the figures that count come from bench/run.sh.
func BenchmarkExternalDeleteItemAction(b *testing.B) {
	const n = 50000
	root, _ := os.Getwd()
	pluginDir := b.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "deleteplugin"), "./bench/deleteplugin")
	build.Dir = filepath.Join(root, "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building bench/deleteplugin: %v\n%s", err, out)
	}

	items := make([]item, n)
	for i := range items {
		items[i] = item{gr: "configmaps", ns: fmt.Sprintf("bench-%02d", i%20), name: fmt.Sprintf("cm-%06d", i),
			labels: map[string]string{"app": "bench", "filler": strings.Repeat("x", 60)}}
	}
	entries := []archivetest.Entry{{Name: "metadata/version", Data: []byte("1.1.0\n")}}
	pad := strings.Repeat("y", 1300)
	for _, it := range items {
		data := bytes.Replace(it.json("plain"), []byte(`"copy":"plain"`), []byte(`"copy":"plain","pad":"`+pad+`"`), 1)
		entries = append(entries, archivetest.Entry{Name: it.path(""), Data: data},
			archivetest.Entry{Name: it.path("v1-preferredversion"), Data: data})
	}
	var tarball bytes.Buffer
	if err := archivetest.Tarball(&tarball, entries); err != nil {
		b.Fatal(err)
	}

	b.Run("floor", func(b *testing.B) {
		for b.Loop() {
			gz, err := gzip.NewReader(bytes.NewReader(tarball.Bytes()))
			if err != nil {
				b.Fatal(err)
			}
			tr := tar.NewReader(gz)
			for {
				if _, err := tr.Next(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, tr); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		w := newWorld(b)
		host := pluginhost.New(pluginhost.Options{Dir: pluginDir, LogLevel: "warn"})
		defer host.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := host.Discover(ctx); err != nil {
			b.Fatal(err)
		}
		e := &Engine{Plugins: host, Cluster: w.cluster}
		for b.Loop() {
			b.StopTimer()
			if err := w.store.PutBackupContents(ctx, w.backup.Name, bytes.NewReader(tarball.Bytes())); err != nil {
				b.Fatal(err)
			}
			w.putBackupFiles(nil)
			runtime.GC()
			b.StartTimer()
			res := e.Run(ctx, Input{Backup: w.backup, Store: w.store})
			if res.Err != nil {
				b.Fatalf("run: %v (%v)", res.Err, res.Messages())
			}
		}
	})
}
