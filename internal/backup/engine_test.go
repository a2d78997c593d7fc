package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/lifeboat-io/lifeboat/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

// faultyStore is a real filesystem store that fails chosen writes, to see
// what a backup leaves behind when storage breaks half-way.
type faultyStore struct {
	storage.ObjectStore
	// failKey makes PutObject of keys ending in it fail after failAfter bytes.
	failKey   string
	failAfter int64
	// existsErr makes ObjectExists fail.
	existsErr error
}

func (f *faultyStore) ObjectExists(ctx context.Context, bucket, key string) (bool, error) {
	if f.existsErr != nil {
		return false, f.existsErr
	}
	return f.ObjectStore.ObjectExists(ctx, bucket, key)
}

var errInjected = errors.New("injected storage failure")

func (f *faultyStore) PutObject(ctx context.Context, bucket, key string, body io.Reader) error {
	if f.failKey == "" || !strings.HasSuffix(key, f.failKey) {
		return f.ObjectStore.PutObject(ctx, bucket, key, body)
	}
	return f.ObjectStore.PutObject(ctx, bucket, key, &failingReader{r: body, left: f.failAfter})
}

type failingReader struct {
	r    io.Reader
	left int64
}

func (fr *failingReader) Read(p []byte) (int, error) {
	if fr.left <= 0 {
		return 0, errInjected
	}
	if int64(len(p)) > fr.left {
		p = p[:fr.left]
	}
	n, err := fr.r.Read(p)
	fr.left -= int64(n)
	return n, err
}

type fixture struct {
	engine *Engine
	store  *storage.BackupStore
	faulty *faultyStore
	dir    string
	ns     string
}

var seq atomic.Int64

func newFixture(t *testing.T, configMaps int) *fixture {
	t.Helper()
	return newFixtureOn(t, cfg, configMaps)
}

// newFixtureOn is newFixture against the API server at cfg.
func newFixtureOn(t *testing.T, cfg *rest.Config, configMaps int) *fixture {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{"path": root})
	if err != nil {
		t.Fatal(err)
	}
	faulty := &faultyStore{ObjectStore: fs}
	acc, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(acc, 4, nil)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	ns := fmt.Sprintf("engine-%d-%d", time.Now().UnixNano()%1e6, seq.Add(1))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range configMaps {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"v": strings.Repeat("x", 1500)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{engine: e, store: storage.NewBackupStore(faulty, "bucket", "p"), faulty: faulty, dir: filepath.Join(root, "bucket"), ns: ns}
}

func (f *fixture) backup(name string) *v1.Backup {
	now := metav1.Now()
	return &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name},
		Spec:       v1.BackupSpec{IncludedNamespaces: []string{f.ns}, StorageLocation: "default"},
		Status:     v1.BackupStatus{Phase: v1.BackupPhaseInProgress, StartTimestamp: &now},
	}
}

// keys lists what the backup left in the store.
func (f *fixture) keys(t *testing.T, name string) []string {
	t.Helper()
	keys, err := f.store.ObjectStore().ListObjects(context.Background(), "bucket", f.store.BackupDir(name))
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, f.store.BackupDir(name))
	}
	return keys
}

func (f *fixture) storedPhase(t *testing.T, name string) v1.BackupPhase {
	t.Helper()
	data, err := f.store.GetBackupMetadata(context.Background(), name)
	if err != nil {
		t.Fatalf("reading velero-backup.json: %v", err)
	}
	var b v1.Backup
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	return b.Status.Phase
}

func TestRunCompletes(t *testing.T) {
	f := newFixture(t, 1200)
	var reports []v1.BackupProgress
	out := f.engine.Run(context.Background(), f.backup("ok"), f.store, func(p v1.BackupProgress) { reports = append(reports, p) })
	if out.Phase != v1.BackupPhaseCompleted || out.Progress.ItemsBackedUp != 1201 {
		t.Fatalf("outcome %+v, want Completed with 1200 configmaps + 1 namespace", out)
	}
	if len(reports) == 0 || reports[len(reports)-1].ItemsBackedUp != 1201 {
		t.Errorf("progress reports %+v should end at 1201", reports)
	}
	if got := f.storedPhase(t, "ok"); got != v1.BackupPhaseCompleted {
		t.Errorf("stored phase %s", got)
	}
	// The size velero_backup_tarball_size_bytes reports is the stored
	// archive's.
	fi, err := os.Stat(filepath.Join(f.dir, "p", "backups", "ok", "ok.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if out.TarballBytes != fi.Size() || out.TarballBytes == 0 {
		t.Errorf("outcome's TarballBytes %d, the stored archive has %d bytes", out.TarballBytes, fi.Size())
	}
}

func TestRunFailsCleanlyWhenTheArchiveUploadBreaks(t *testing.T) {
	f := newFixture(t, 600)
	f.faulty.failKey, f.faulty.failAfter = "broken.tar.gz", 2<<10
	out := f.engine.Run(context.Background(), f.backup("broken"), f.store, nil)
	if out.Phase != v1.BackupPhaseFailed || !strings.Contains(out.FailureReason, "injected storage failure") {
		t.Fatalf("outcome %+v, want Failed with the storage error", out)
	}
	// Only the log and the failed backup's metadata remain: nothing a reader
	// could take for a complete backup.
	if got := strings.Join(f.keys(t, "broken"), ","); got != "broken-logs.gz,velero-backup.json" {
		t.Errorf("left behind %q", got)
	}
	if got := f.storedPhase(t, "broken"); got != v1.BackupPhaseFailed {
		t.Errorf("stored phase %s, want Failed", got)
	}
}

func TestRunFailsWhenTheMetadataUploadBreaks(t *testing.T) {
	f := newFixture(t, 10)
	f.faulty.failKey, f.faulty.failAfter = "velero-backup.json", 0
	out := f.engine.Run(context.Background(), f.backup("nometa"), f.store, nil)
	if out.Phase != v1.BackupPhaseFailed {
		t.Fatalf("outcome %+v, want Failed", out)
	}
	for _, k := range f.keys(t, "nometa") {
		if strings.HasSuffix(k, ".tar.gz") {
			t.Errorf("the tarball of a failed backup was left behind: %s", k)
		}
	}
}

func TestRunRefusesAnExistingBackup(t *testing.T) {
	f := newFixture(t, 1)
	if out := f.engine.Run(context.Background(), f.backup("twice"), f.store, nil); out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("first run: %+v", out)
	}
	out := f.engine.Run(context.Background(), f.backup("twice"), f.store, nil)
	if out.Phase != v1.BackupPhaseFailed || !strings.Contains(out.FailureReason, "already exists") {
		t.Fatalf("second run: %+v, want Failed because the backup exists", out)
	}
	if got := f.storedPhase(t, "twice"); got != v1.BackupPhaseCompleted {
		t.Errorf("the second run overwrote the first backup's metadata: phase %s", got)
	}
	if !out.StoredNothing || !out.NameTaken {
		t.Errorf("second run: StoredNothing %v NameTaken %v, want both", out.StoredNothing, out.NameTaken)
	}
}

// A run that cannot even tell whether its name is taken has written
// nothing, so it must not clean up: what is under that name may be another
// backup's, whole.
func TestRunThatWroteNothingLeavesTheStoreAlone(t *testing.T) {
	f := newFixture(t, 1)
	if out := f.engine.Run(context.Background(), f.backup("taken"), f.store, nil); out.Phase != v1.BackupPhaseCompleted || out.StoredNothing {
		t.Fatalf("first run: %+v", out)
	}
	before := f.keys(t, "taken")
	f.faulty.existsErr = errInjected
	out := f.engine.Run(context.Background(), f.backup("taken"), f.store, nil)
	f.faulty.existsErr = nil
	if out.Phase != v1.BackupPhaseFailed || !out.StoredNothing || out.NameTaken {
		t.Fatalf("second run: %+v, want Failed having stored nothing", out)
	}
	if got := f.keys(t, "taken"); !slices.Equal(got, before) {
		t.Errorf("keys after a run that wrote nothing: %v, want %v", got, before)
	}
	if got := f.storedPhase(t, "taken"); got != v1.BackupPhaseCompleted {
		t.Errorf("stored phase %s, want the first backup's Completed", got)
	}
	var b v1.Backup
	ApplyOutcome(&b, out)
	if !b.StoredNothing() {
		t.Errorf("conditions %+v: want Stored=False", b.Status.Conditions)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	f := newFixture(t, 300)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := f.engine.Run(ctx, f.backup("stopped"), f.store, nil)
	if out.Phase != v1.BackupPhaseFailed {
		t.Fatalf("outcome %+v, want Failed", out)
	}
	for _, k := range f.keys(t, "stopped") {
		if strings.HasSuffix(k, ".tar.gz") {
			t.Errorf("a stopped backup left its tarball: %s", k)
		}
	}
}

// A backup the server's restores and deletions would refuse fails when it
// is written, naming the item and the flag, and leaves no tarball that a
// restore could later trip over.
func TestRunFailsOnAnItemPastTheArchiveLimits(t *testing.T) {
	tests := []struct {
		name   string
		big    bool
		limits archive.Limits
		want   []string
	}{
		{
			name:   "one item",
			big:    true,
			limits: archive.Limits{MaxEntryBytes: 100 << 10},
			want:   []string{"writing the archive: archive: item", "configmaps/namespaces/NS/big.json", "--max-item-size=100Ki"},
		},
		{
			name:   "the whole archive",
			limits: archive.Limits{MaxTotalBytes: 64 << 10},
			want:   []string{"writing the archive: archive: item", "configmaps/namespaces/NS/cm-00", "--max-archive-size=64Ki"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 30)
			if tc.big {
				big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"v": strings.Repeat("x", 200<<10)}}
				if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(f.ns).Create(context.Background(), big, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.engine.Limits = tc.limits
			out := f.engine.Run(context.Background(), f.backup("limited"), f.store, nil)
			if out.Phase != v1.BackupPhaseFailed {
				t.Fatalf("outcome %+v, want Failed", out)
			}
			for _, want := range tc.want {
				if want = strings.ReplaceAll(want, "NS", f.ns); !strings.Contains(out.FailureReason, want) {
					t.Errorf("failure reason %q does not name %q", out.FailureReason, want)
				}
			}
			if got := strings.Join(f.keys(t, "limited"), ","); got != "limited-logs.gz,velero-backup.json" {
				t.Errorf("left behind %q", got)
			}
		})
	}
}
