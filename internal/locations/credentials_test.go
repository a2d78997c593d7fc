package locations

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func selector(name, key string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
}

func vsl(ns, name string, config map[string]string, cred *corev1.SecretKeySelector) *v1.VolumeSnapshotLocation {
	return &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.VolumeSnapshotLocationSpec{Provider: "example.io/snapshots", Config: config, Credential: cred},
	}
}

func store(t *testing.T) *credentials.Store {
	t.Helper()
	s, err := credentials.Open(filepath.Join(t.TempDir(), "creds"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func files(t *testing.T, dir string) []string {
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

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestSnapshotLocationHandsItsCredentialsToThePlugin(t *testing.T) {
	ns := namespace(t)
	create(t, secret(ns, "cloud", map[string]string{"cloud": "[default]\naws_access_key_id=AKIA-EAST\n"}))
	create(t, vsl(ns, "east", map[string]string{"region": "east"}, selector("cloud", "cloud")))
	create(t, vsl(ns, "plain", map[string]string{"region": "west"}, nil))
	// Velero passes a credentialsFile set by hand in the config as it is,
	// unless the location names a credential.
	create(t, vsl(ns, "by-hand", map[string]string{credentials.ConfigKey: "/etc/cloud/key"}, nil))
	create(t, vsl(ns, "overridden", map[string]string{credentials.ConfigKey: "/etc/cloud/key"}, selector("cloud", "cloud")))
	creds := store(t)
	r := &Resolver{Client: kube, SecretReader: kube, Namespace: ns, Credentials: creds}

	provider, config, err := r.SnapshotLocation(ctx(t), "east")
	if err != nil {
		t.Fatal(err)
	}
	path := config[credentials.ConfigKey]
	if provider != "example.io/snapshots" || config["region"] != "east" || len(config) != 2 {
		t.Errorf("SnapshotLocation = %s, %v", provider, config)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "[default]\naws_access_key_id=AKIA-EAST\n" {
		t.Errorf("credentialsFile %s holds %q (%v), want the secret's key", path, got, err)
	}
	if filepath.Dir(path) != creds.Dir() {
		t.Errorf("credentialsFile %s is not in the store %s", path, creds.Dir())
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode() != 0o600 {
		t.Errorf("credentialsFile mode %v (%v), want -rw-------", fi.Mode(), err)
	}

	_, config, err = r.SnapshotLocation(ctx(t), "plain")
	if err != nil || len(config) != 1 || config["region"] != "west" {
		t.Errorf("location without a credential: config %v, %v", config, err)
	}
	_, config, err = r.SnapshotLocation(ctx(t), "by-hand")
	if err != nil || config[credentials.ConfigKey] != "/etc/cloud/key" {
		t.Errorf("credentialsFile set by hand: config %v, %v", config, err)
	}
	_, config, err = r.SnapshotLocation(ctx(t), "overridden")
	if err != nil || filepath.Dir(config[credentials.ConfigKey]) != creds.Dir() {
		t.Errorf("credential and credentialsFile by hand: config %v, %v; want the credential's file", config, err)
	}

	// Without a store, a location with a credential is refused, never
	// used with the plugin's default credentials.
	bare := &Resolver{Client: kube, SecretReader: kube, Namespace: ns}
	if _, config, err := bare.SnapshotLocation(ctx(t), "east"); err == nil || !strings.Contains(err.Error(), "credentials directory") {
		t.Errorf("resolver without a store: %v, %v; want a refusal", config, err)
	}
}

func TestSnapshotLocationErrorsNameWhatIsWrong(t *testing.T) {
	ns := namespace(t)
	create(t, secret(ns, "cloud", map[string]string{"cloud": "x"}))
	create(t, vsl(ns, "no-secret", nil, selector("nope", "cloud")))
	create(t, vsl(ns, "no-key", nil, selector("cloud", "other")))
	r := &Resolver{Client: kube, SecretReader: kube, Namespace: ns, Credentials: store(t)}
	for name, want := range map[string]string{
		"gone":      `VolumeSnapshotLocation "gone" not found in namespace "` + ns + `"`,
		"no-secret": `VolumeSnapshotLocation "no-secret": spec.credential names secret "nope", which does not exist`,
		"no-key":    `VolumeSnapshotLocation "no-key": secret "cloud" has no key "other" (spec.credential.key)`,
	} {
		_, config, err := r.SnapshotLocation(ctx(t), name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, %v; want an error containing %q", name, config, err, want)
		}
	}
}

// A location found gone takes its credentials with it, even when the
// event saying so was missed.
func TestSnapshotLocationFoundGoneLosesItsCredentials(t *testing.T) {
	ns := namespace(t)
	create(t, secret(ns, "cloud", map[string]string{"cloud": "x"}))
	loc := vsl(ns, "east", nil, selector("cloud", "cloud"))
	create(t, loc)
	creds := store(t)
	r := &Resolver{Client: kube, SecretReader: kube, Namespace: ns, Credentials: creds}
	_, config, err := r.SnapshotLocation(ctx(t), "east")
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(ctx(t), loc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.SnapshotLocation(ctx(t), "east"); err == nil {
		t.Fatal("a deleted location was opened")
	}
	if _, err := os.Lstat(config[credentials.ConfigKey]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("credentials of the deleted location: %v", err)
	}
}

// initRecorder is an ObjectStore plugin that records its Init config; the
// resolver calls nothing else while opening a location.
type initRecorder struct {
	api.ObjectStore
	mu     sync.Mutex
	config map[string]string
}

func (p *initRecorder) Init(config map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.config = config
	return nil
}

type onePlugin struct{ store *initRecorder }

func (o onePlugin) ObjectStore(string) (api.ObjectStore, error) { return o.store, nil }
func (onePlugin) IsExternal(kind api.Kind, name string) bool    { return true }

// Storage and snapshot locations share the store; each location's files
// go when the location goes, and the files of a secret a location stops
// naming go when it changes.
func TestCredentialsGoWithTheirLocation(t *testing.T) {
	ns := namespace(t)
	create(t, secret(ns, "cloud", map[string]string{"cloud": "one", "other": "two"}))
	east := vsl(ns, "east", nil, selector("cloud", "cloud"))
	create(t, east)
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "east"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "example.io/store",
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "b"}},
			Credential:  selector("cloud", "other"),
		},
	}
	create(t, bsl)

	creds := store(t)
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	if err := RemoveCredentialsOfGoneLocations(cctx, informers, creds, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- informers.Start(cctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if !informers.WaitForCacheSync(ctx(t)) {
		t.Fatal("cache did not sync")
	}

	plugin := &initRecorder{}
	r := &Resolver{Client: kube, SecretReader: kube, Namespace: ns, Credentials: creds, Plugins: onePlugin{plugin}}
	if _, err := r.Open(ctx(t), bsl); err != nil {
		t.Fatal(err)
	}
	bslFile := plugin.config[credentials.ConfigKey]
	if got, err := os.ReadFile(bslFile); err != nil || string(got) != "two" {
		t.Fatalf("the storage plugin's credentialsFile %q holds %q (%v)", bslFile, got, err)
	}
	_, config, err := r.SnapshotLocation(ctx(t), "east")
	if err != nil {
		t.Fatal(err)
	}
	oldFile := config[credentials.ConfigKey]
	if oldFile == bslFile {
		t.Fatalf("a storage and a snapshot location of one name share %s", oldFile)
	}

	// The snapshot location names another key: its old file goes, the
	// new one stays.
	east.Spec.Credential = selector("cloud", "other")
	if err := kube.Update(ctx(t), east); err != nil {
		t.Fatal(err)
	}
	_, config, err = r.SnapshotLocation(ctx(t), "east")
	if err != nil {
		t.Fatal(err)
	}
	newFile := config[credentials.ConfigKey]
	eventually(t, "the old secret's file is removed", func() bool { return gone(oldFile) })
	if gone(newFile) || gone(bslFile) {
		t.Fatalf("files left after the change: %v, want %s and %s", files(t, creds.Dir()), newFile, bslFile)
	}

	// The snapshot location is deleted: its file goes, the storage
	// location's stays; then that one is deleted too.
	if err := kube.Delete(ctx(t), east); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted snapshot location's file is removed", func() bool { return gone(newFile) })
	if gone(bslFile) {
		t.Fatal("the storage location's file went with the snapshot location")
	}
	if err := kube.Delete(ctx(t), bsl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted storage location's file is removed", func() bool { return gone(bslFile) })
	if got := files(t, creds.Dir()); len(got) != 0 {
		t.Errorf("the credentials directory still holds %q", got)
	}
}

func gone(p string) bool {
	_, err := os.Lstat(p)
	return errors.Is(err, fs.ErrNotExist)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
