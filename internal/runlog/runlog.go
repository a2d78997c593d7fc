// Package runlog is the log of one backup or restore, uploaded next to it
// as a gzipped file. It is written to a temp file rather than memory because
// a run with many failing items can log a lot.
package runlog

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/klauspost/compress/gzip"
)

// Log is a structured logger writing to a gzipped temp file.
type Log struct {
	*slog.Logger
	file   *os.File
	gz     *gzip.Writer
	closed bool
}

// Create creates a log in dir (the server's work directory; "" is the
// system temp dir) whose lines all carry attrs.
func Create(dir string, attrs ...any) (*Log, error) {
	f, err := os.CreateTemp(dir, "run-log-")
	if err != nil {
		return nil, fmt.Errorf("creating a log file: %w", err)
	}
	gz := gzip.NewWriter(f)
	h := slog.NewTextHandler(gz, &slog.HandlerOptions{Level: slog.LevelDebug})
	return &Log{Logger: slog.New(h).With(attrs...), file: f, gz: gz}, nil
}

// Reader ends the log and returns its gzipped content from the start. It
// may be called again (a retried upload); lines logged after the first call
// are lost.
func (l *Log) Reader() (io.Reader, error) {
	if !l.closed {
		l.closed = true
		if err := l.gz.Close(); err != nil {
			return nil, fmt.Errorf("closing the log: %w", err)
		}
	}
	if _, err := l.file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	return l.file, nil
}

// Discard removes the log's file.
func (l *Log) Discard() {
	_ = l.file.Close()
	_ = os.Remove(l.file.Name())
}
