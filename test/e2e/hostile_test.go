package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/server"
)

// Hostile and oversized inputs, against a server started with its archive
// limits lowered (--max-item-size=256Ki): a backup of an item past them
// fails as it is written, naming the item and the flag; a restore of a
// tarball whose sparse entries would unpack to gigabytes is refused at its
// first entry; a resource policy of nested YAML aliases fails the backup's
// validation at once, naming the alias, and the server carries on.
func TestHostileAndOversizedInputs(t *testing.T) {
	limits := archive.DefaultLimits()
	limits.MaxEntryBytes = 256 << 10
	w := newDelWorld(t, func(o *server.Options) { o.ArchiveLimits = limits })
	w.configMaps("small")
	ok := w.backup()

	t.Run("an item past --max-item-size fails the backup", func(t *testing.T) {
		big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.app, Name: "big"}, Data: map[string]string{"v": strings.Repeat("x", 300<<10)}}
		env.Create(t, big)
		defer func() { _ = env.Client.Delete(context.Background(), big) }()
		b := w.newBackup(v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}})
		if b.Status.Phase != v1.BackupPhaseFailed {
			t.Fatalf("backup phase %s, want Failed", b.Status.Phase)
		}
		for _, want := range []string{"resources/configmaps/namespaces/" + w.app + "/big.json", "--max-item-size=256Ki"} {
			if !strings.Contains(b.Status.FailureReason, want) {
				t.Errorf("failure reason %q does not name %q", b.Status.FailureReason, want)
			}
		}
		for _, k := range w.keys("backups/" + b.Name) {
			if strings.HasSuffix(k, ".tar.gz") {
				t.Errorf("the failed backup left its tarball: %s", k)
			}
		}
	})

	t.Run("a sparse tarball is refused by the restore", func(t *testing.T) {
		// What anyone who can write to the bucket could put in place of a
		// backup's tarball: 760 bytes that unpack to 1.28 GiB.
		var sparse bytes.Buffer
		if err := archivetest.Sparse(&sparse, archivetest.SparsePAX10, 20, 64<<20); err != nil {
			t.Fatal(err)
		}
		tarball := filepath.Join(w.bucket, "lifeboat", "backups", ok.Name, ok.Name+".tar.gz")
		if err := os.WriteFile(tarball, sparse.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		rs := w.newRestore(ok.Name)
		if rs.Status.Phase != v1.RestorePhaseFailed {
			t.Fatalf("restore phase %s (%s), want Failed", rs.Status.Phase, rs.Status.FailureReason)
		}
		for _, want := range []string{archivetest.SparseName(0), "sparse file"} {
			if !strings.Contains(rs.Status.FailureReason, want) {
				t.Errorf("failure reason %q does not name %q", rs.Status.FailureReason, want)
			}
		}
		t.Logf("refused in %v: %s", time.Since(start), rs.Status.FailureReason)
	})

	t.Run("a policy of nested aliases fails validation", func(t *testing.T) {
		var doc strings.Builder
		doc.WriteString("version: v1\nvolumePolicies:\n- action:\n    type: custom\n    parameters:\n      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
		for i := 1; i <= 9; i++ {
			fmt.Fprintf(&doc, "      l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("laughs")}, Data: map[string]string{"policy.yaml": doc.String()}}
		env.Create(t, cm)
		b := w.newBackup(v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app},
			ResourcePolicy: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: cm.Name}})
		if b.Status.Phase != v1.BackupPhaseFailedValidation {
			t.Fatalf("backup phase %s, want FailedValidation", b.Status.Phase)
		}
		if got := strings.Join(b.Status.ValidationErrors, "\n"); !strings.Contains(got, "volumePolicies[0].action.parameters.l4[7]: the YAML alias *l3") {
			t.Errorf("validation errors %q do not name the alias", got)
		}
		// The server is still there to take the next backup.
		if b := w.newBackup(v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}}); b.Status.Phase != v1.BackupPhaseCompleted {
			t.Errorf("the next backup: phase %s (%s)", b.Status.Phase, b.Status.FailureReason)
		}
	})
}

// newBackup creates a backup with spec and waits for it to end.
func (w *delWorld) newBackup(spec v1.BackupSpec) *v1.Backup {
	w.t.Helper()
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")}, Spec: spec}
	env.Create(w.t, b)
	w.poll("backup "+b.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.Phase.IsTerminal(), nil
	})
	return b
}

// newRestore restores backup into a fresh namespace and waits for it to end.
func (w *delWorld) newRestore(backup string) *v1.Restore {
	w.t.Helper()
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("rs")},
		Spec:       v1.RestoreSpec{BackupName: backup, NamespaceMapping: map[string]string{w.app: env.Name("restored")}},
	}
	env.Create(w.t, rs)
	w.poll("restore "+rs.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		switch rs.Status.Phase {
		case v1.RestorePhaseCompleted, v1.RestorePhasePartiallyFailed, v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
			return true, nil
		}
		return false, nil
	})
	return rs
}
