package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func getLocation(t *testing.T, c client.Client, name string) *v1.BackupStorageLocation {
	t.Helper()
	l := &v1.BackupStorageLocation{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1.DefaultNamespace, Name: name}, l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBackupLocationCreate(t *testing.T) {
	def := location("default")
	def.Spec.Default = true
	c := newFakeBuilder(t, def).Build()
	f := newTestFactory(c)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, f, "backup-location", "create", "second", "--provider", "aws", "--bucket", "b2", "--prefix", "p",
		"--config", "region=eu-west-1,s3Url=https://s3.example", "--credential", "creds=cloud", "--access-mode", "ReadOnly",
		"--validation-frequency", "5m", "--cacert", ca, "--labels", "team=a")
	if err != nil {
		t.Fatal(err)
	}
	if out != "Backup storage location \"second\" configured successfully.\n" {
		t.Errorf("output %q", out)
	}
	l := getLocation(t, c, "second")
	s := l.Spec
	if s.Provider != "aws" || s.ObjectStorage.Bucket != "b2" || s.ObjectStorage.Prefix != "p" || s.Config["region"] != "eu-west-1" ||
		s.Config["s3Url"] != "https://s3.example" || s.Credential == nil || s.Credential.Name != "creds" || s.Credential.Key != "cloud" ||
		s.AccessMode != v1.BackupStorageLocationAccessModeReadOnly || s.ValidationFrequency == nil || s.ValidationFrequency.Minutes() != 5 ||
		s.BackupSyncPeriod != nil || string(s.ObjectStorage.CACert) != "PEM" || s.Default || l.Labels["team"] != "a" {
		t.Errorf("created %+v", l)
	}
	// A second default is refused while one exists, as in Velero.
	_, _, err = run(t, f, "backup-location", "create", "third", "--provider", "aws", "--bucket", "b3", "--default")
	if err == nil || !strings.Contains(err.Error(), `"default"`) {
		t.Errorf("second default: %v", err)
	}
	for _, bad := range [][]string{
		{"--bucket", "b"}, {"--provider", "aws"}, {"--provider", "aws", "--bucket", "b", "--access-mode", "rw"},
		{"--provider", "aws", "--bucket", "b", "--credential", "a=b,c=d"},
	} {
		if _, _, err := run(t, f, append([]string{"backup-location", "create", "x"}, bad...)...); err == nil {
			t.Errorf("create %v: no error", bad)
		}
	}
}

func TestBackupLocationGetAndSet(t *testing.T) {
	def := location("default")
	def.Spec.Default = true
	def.Status.Phase = v1.BackupStorageLocationPhaseAvailable
	other := location("other")
	other.Spec.ObjectStorage.Prefix = "team"
	c := newFakeBuilder(t, def, other).Build()
	f := newTestFactory(c)
	out, _, err := run(t, f, "backup-location", "get")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "BUCKET/PREFIX") ||
		!strings.Contains(lines[1], "Available") || !strings.HasSuffix(lines[1], "true") || !strings.Contains(lines[2], "backups/team") ||
		!strings.Contains(lines[2], "Unknown") {
		t.Errorf("get:\n%s", out)
	}
	out, _, err = run(t, f, "backup-location", "get", "--default")
	if err != nil || strings.Contains(out, "other") || !strings.Contains(out, "default") {
		t.Errorf("get --default: %v\n%s", err, out)
	}

	// Moving the default: refused while another is default, then done in two steps.
	if _, _, err := run(t, f, "backup-location", "set", "other", "--default"); err == nil {
		t.Error("set --default with another default: no error")
	}
	if _, _, err := run(t, f, "backup-location", "set", "default", "--default=false"); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, f, "backup-location", "set", "other", "--default", "--credential", "s=k")
	if err != nil || out != "Backup storage location \"other\" configured successfully.\n" {
		t.Fatalf("set: %v %q", err, out)
	}
	if getLocation(t, c, "default").Spec.Default || !getLocation(t, c, "other").Spec.Default || getLocation(t, c, "other").Spec.Credential.Key != "k" {
		t.Error("default not moved")
	}
	if _, _, err := run(t, f, "backup-location", "set", "nosuch", "--default=false"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("set of a missing location: %v", err)
	}
}

// Deleting a location deletes its Backup objects, as Velero does, but not
// their data: Lifeboat's finalizer is removed first so no deletion starts.
func TestBackupLocationDeleteRemovesItsBackupObjects(t *testing.T) {
	mk := func(name, loc string) *v1.Backup {
		b := &v1.Backup{ObjectMeta: objMeta(name, map[string]string{v1.StorageLocationLabel: loc})}
		b.Spec.StorageLocation = loc
		b.Finalizers = []string{v1.BackupFinalizer}
		return b
	}
	repo := &v1.BackupRepository{ObjectMeta: objMeta("old-repo", map[string]string{v1.StorageLocationLabel: "old"})}
	c := newFakeBuilder(t, location("old"), location("keep"), mk("b1", "old"), mk("b2", "old"), mk("b3", "keep"), repo).Build()
	out, _, err := run(t, newTestFactory(c), "backup-location", "delete", "old", "--confirm")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Backup storage location "old" deleted successfully.`, `"b1" deleted successfully`, `"b2" deleted successfully`,
		`Backup repository associated with deleted BSL(s) "old-repo" deleted successfully.`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if exists(t, c, &v1.BackupStorageLocation{}, "old") || exists(t, c, &v1.Backup{}, "b1") || exists(t, c, &v1.Backup{}, "b2") || exists(t, c, &v1.BackupRepository{}, "old-repo") {
		t.Error("location or its backups left")
	}
	if !exists(t, c, &v1.BackupStorageLocation{}, "keep") || !exists(t, c, &v1.Backup{}, "b3") {
		t.Error("another location's backup deleted")
	}
}

func TestSnapshotLocationCommands(t *testing.T) {
	c := newFakeBuilder(t).Build()
	f := newTestFactory(c)
	out, _, err := run(t, f, "snapshot-location", "create", "ebs", "--provider", "aws", "--config", "region=eu-west-1")
	if err != nil || out != "Snapshot volume location \"ebs\" configured successfully.\n" {
		t.Fatalf("create: %v %q", err, out)
	}
	out, _, err = run(t, f, "snapshot-location", "set", "ebs", "--credential", "s=k")
	if err != nil || out != "Volume snapshot location \"ebs\" configured successfully.\n" {
		t.Fatalf("set: %v %q", err, out)
	}
	vsl := &v1.VolumeSnapshotLocation{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1.DefaultNamespace, Name: "ebs"}, vsl); err != nil {
		t.Fatal(err)
	}
	if vsl.Spec.Provider != "aws" || vsl.Spec.Config["region"] != "eu-west-1" || vsl.Spec.Credential == nil || vsl.Spec.Credential.Name != "s" {
		t.Errorf("vsl %+v", vsl.Spec)
	}
	out, _, err = run(t, f, "snapshot-location", "get")
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "ebs") || !strings.Contains(out, "aws") {
		t.Errorf("get: %v\n%s", err, out)
	}
	if _, _, err := run(t, f, "snapshot-location", "create", "x"); err == nil || !strings.Contains(err.Error(), "--provider") {
		t.Errorf("no provider: %v", err)
	}
}
