package backup

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/klauspost/compress/gzip"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// backupLog is the backup's own log, uploaded as `<backup>-logs.gz`. It is
// written to a gzipped temp file rather than memory because a backup with
// many failing items can log a lot.
type backupLog struct {
	*slog.Logger
	file *os.File
	gz   *gzip.Writer
}

func newBackupLog(b *v1.Backup) (*backupLog, error) {
	f, err := os.CreateTemp("", "lifeboat-backup-log-")
	if err != nil {
		return nil, fmt.Errorf("creating the backup's log file: %w", err)
	}
	gz := gzip.NewWriter(f)
	h := slog.NewTextHandler(gz, &slog.HandlerOptions{Level: slog.LevelDebug})
	return &backupLog{Logger: slog.New(h).With("backup", b.Namespace+"/"+b.Name), file: f, gz: gz}, nil
}

// reader closes the log for writing and returns its gzipped content.
func (l *backupLog) reader() (io.ReadCloser, error) {
	if err := l.gz.Close(); err != nil {
		return nil, fmt.Errorf("closing the backup's log: %w", err)
	}
	if _, err := l.file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("reading the backup's log: %w", err)
	}
	return io.NopCloser(l.file), nil
}

func (l *backupLog) discard() {
	_ = l.file.Close()
	_ = os.Remove(l.file.Name())
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }
