package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/controller"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

func TestReadyOnlyOnceTheCacheSyncedAndTheLeaderCheckedEveryLocation(t *testing.T) {
	lc, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lc.Stop() }()
	scheme, err := cluster.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(lc.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{"velero": {}}})
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan struct{})
	checks := &controller.LocationChecks{}
	r := &readiness{cache: c, elected: elected, checks: checks}
	req := httptest.NewRequest("GET", "/readyz", nil)

	if err := r.cacheSynced(req); err == nil {
		t.Error("ready before the cache started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	w, err := client.New(lc.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "primary"},
		Spec: v1.BackupStorageLocationSpec{Provider: "aws",
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "b"}}},
	}
	if err := w.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Create(ctx, bsl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.cacheSynced(req) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the cache never synced")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := r.locations(req); err != nil {
		t.Errorf("a standby is not ready: %v", err)
	}
	close(elected)
	var lerr error
	for lerr = r.locations(req); lerr == nil || !strings.Contains(lerr.Error(), "velero/primary"); lerr = r.locations(req) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader was ready before checking velero/primary: %v", lerr)
		}
		time.Sleep(100 * time.Millisecond) // the cache may not have seen the location yet
	}
	checks.Record(types.NamespacedName{Namespace: "velero", Name: "primary"})
	if err := r.locations(req); err != nil {
		t.Errorf("not ready after every location was checked: %v", err)
	}
	second := bsl.DeepCopy()
	second.ResourceVersion, second.Name = "", "secondary"
	if err := w.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := r.locations(req); err != nil {
		t.Errorf("readiness flapped on a new location: %v", err)
	}
}
