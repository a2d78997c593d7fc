// Command writer is the demo's stateful workload (image
// lifeboat-demo-writer): every few seconds it appends a numbered,
// timestamped line to a file on a mounted volume, logs the line, and
// serves the whole file over HTTP. The count goes on from the file's last
// line, so after a backup and a restore the log shows at once whether the
// volume's data came back ("resuming after line 42") or not ("starting a
// new file").
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	fl := flag.NewFlagSet("writer", flag.ExitOnError)
	file := fl.String("file", "/data/lines.txt", "file to append to (on the volume to back up)")
	every := fl.Duration("every", 5*time.Second, "time between two lines")
	listen := fl.String("listen", ":8080", "address serving the file over HTTP (empty: do not serve)")
	_ = fl.Parse(os.Args[1:])
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *listen != "" {
		srv := &http.Server{Addr: *listen, Handler: serveFile(*file), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serving the file", "addr", *listen, "err", err)
			}
		}()
		defer srv.Close()
	}
	if err := run(ctx, log, *file, *every); err != nil {
		log.Error("writer stopped", "err", err)
		os.Exit(1)
	}
}

// run appends a line every interval until ctx ends.
func run(ctx context.Context, log *slog.Logger, file string, every time.Duration) error {
	last, err := lastLine(file)
	if err != nil {
		return err
	}
	if last > 0 {
		log.Info("resuming after line", "line", last, "file", file)
	} else {
		log.Info("starting a new file", "file", file)
	}
	host, _ := os.Hostname()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := last + 1; ; n++ {
		line := fmt.Sprintf("%d %s %s", n, time.Now().UTC().Format(time.RFC3339), host)
		if err := appendLine(file, line); err != nil {
			return err
		}
		log.Info("wrote", "line", line)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// lastLine returns the number of the file's last line, 0 for a missing or
// empty file.
func lastLine(file string) (int, error) {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", file, err)
	}
	defer f.Close()
	last := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		num, _, _ := strings.Cut(sc.Text(), " ")
		if n, err := strconv.Atoi(num); err == nil {
			last = n
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", file, err)
	}
	return last, nil
}

func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("cannot write %s as uid %d: make the volume writable for it (pod securityContext fsGroup, or runAsUser): %w", file, os.Getuid(), err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot create %s: is a volume mounted at %s? %w", file, filepath.Dir(file), err)
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", file, err)
	}
	// Sync: a backup taken right after the log line must find the line.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", file, err)
	}
	return f.Close()
}

func serveFile(file string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		http.ServeFile(w, r, file)
	})
}
