// Package deleteactions holds Lifeboat's built-in DeleteItemActions. They
// are ordinary entries of the plugin registry (registered by the server
// with RegisterBuiltIn), so `lifeboat plugin get` lists them and a plugin
// binary of the same name replaces them.
//
// lifeboat.io/csi-snapshot-cleanup deletes the storage snapshots of the
// VolumeSnapshotContents a backup stored, whether or not the contents are
// still in the cluster (through a content made again for the purpose, as
// Velero does), and the backup's VolumeSnapshots and contents that are.
//
// lifeboat.io/labelled-resource-cleanup deletes objects labelled with the
// backup's name, of kinds listed in ConfigMaps of the server namespace:
//
//	apiVersion: v1
//	kind: ConfigMap
//	metadata:
//	  namespace: velero
//	  name: cleanup-exports
//	  labels:
//	    lifeboat.io/cleanup-resources: "true"   # any value
//	data:
//	  resources: |
//	    # one resource per line, as resource.group; core kinds without a group
//	    configmaps
//	    exports.storage.example.io
//
// The key "resources" is the only one allowed; blank lines and lines
// starting with # are skipped. Every entry must be served by the API
// server, or the deletion fails naming the ConfigMap, the key and the
// entry: a misspelt kind would otherwise leave its objects behind without
// a word.
//
// The objects it deletes are usually not in the backup, so it cannot apply
// to them; it applies to the backup's namespace items instead, which a
// backup holds for every namespace it has items in. For each namespace
// item it deletes the listed namespaced kinds' objects in that namespace,
// and the listed cluster-scoped kinds' objects anywhere (once per plugin
// instance; a repeat finds nothing, so it is harmless). Objects in
// namespaces the backup holds nothing from are not looked for, and a
// backup of cluster-scoped resources only has no namespace items, so
// nothing of this action runs for it.
//
// Both actions delete only objects labelled velero.io/backup-name with the
// backup's label value and not labelled velero.io/restore-name: a restore
// labels what it creates with the backup's name too, and deleting a backup
// must never delete what was restored from it.
package deleteactions

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
)

// Registry names of the built-in DeleteItemActions.
const (
	CSISnapshotCleanupName      = "lifeboat.io/csi-snapshot-cleanup"
	LabelledResourceCleanupName = "lifeboat.io/labelled-resource-cleanup"
)

// minResetInterval spaces out rediscoveries after a kind was not found. A
// backup full of snapshots from a cluster without the snapshot CRDs would
// otherwise rediscover the whole API once per item.
const minResetInterval = 10 * time.Second

// Clients are what the actions reach the cluster with. One value is shared
// by every instance of the actions.
type Clients struct {
	Dynamic dynamic.Interface
	// Mapper resolves resource.group names to a served version and scope.
	// If it is a meta.ResettableRESTMapper it is reset (at most every 10 s)
	// when a kind is not found, so CRDs installed after the server started
	// are seen.
	Mapper meta.RESTMapper
	// Namespace is the server's namespace, where the cleanup ConfigMaps live.
	Namespace string
	Log       *slog.Logger
	// CSIWait bounds each wait for the snapshot controllers (zero:
	// DefaultCSIWait).
	CSIWait time.Duration

	mu        sync.Mutex
	lastReset time.Time
}

// NewClients shares the server's clients with the actions.
func NewClients(acc *cluster.Access, namespace string, log *slog.Logger) *Clients {
	return &Clients{Dynamic: acc.Dynamic, Mapper: acc.Mapper, Namespace: namespace, Log: log}
}

// resolve finds the served version and the scope of gr. An error matching
// meta.IsNoMatchError means the API server does not serve it.
func (c *Clients) resolve(gr schema.GroupResource) (*meta.RESTMapping, error) {
	m, err := c.lookup(gr)
	if meta.IsNoMatchError(err) && c.mayReset() {
		m, err = c.lookup(gr)
	}
	return m, err
}

func (c *Clients) lookup(gr schema.GroupResource) (*meta.RESTMapping, error) {
	gvk, err := c.Mapper.KindFor(gr.WithVersion(""))
	if err != nil {
		return nil, err
	}
	return c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

func (c *Clients) mayReset() bool {
	rm, ok := c.Mapper.(meta.ResettableRESTMapper)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastReset) < minResetInterval {
		return false
	}
	c.lastReset = time.Now()
	rm.Reset()
	return true
}

func (c *Clients) csiWait() time.Duration {
	if c.CSIWait <= 0 {
		return DefaultCSIWait
	}
	return c.CSIWait
}

func (c *Clients) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c *Clients) resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	r := c.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace)
	}
	return r
}

// callCtx is the context of one API call.
func callCtx() (context.Context, context.CancelFunc) {
	// The DeleteItemAction interface gives the actions no context, and a
	// hung call would hold a backup's deletion.
	return context.WithTimeout(context.Background(), cluster.CallTimeout)
}

// madeFor reports whether obj was made for backup b (and not restored from
// it). A UID label, when both sides have one, must match too, so that an
// object of an earlier backup of the same name is not taken for this one's.
func madeFor(obj *unstructured.Unstructured, b *v1.Backup) bool {
	l := obj.GetLabels()
	if l[v1.BackupNameLabel] != v1.LabelValue(b.Name) {
		return false
	}
	if _, restored := l[v1.RestoreNameLabel]; restored {
		return false
	}
	if uid := l[v1.BackupUIDLabel]; uid != "" && b.UID != "" && uid != string(b.UID) {
		return false
	}
	return true
}

// deleteObject deletes obj if it is still the same object (UID
// precondition); gone already is success.
func (c *Clients) deleteObject(res dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	ctx, cancel := callCtx()
	defer cancel()
	uid := obj.GetUID()
	err := res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Conflict: the UID no longer matches, so a new object took the
		// name; it is not the one made for the backup.
		return nil
	}
	return err
}

func describe(gr schema.GroupResource, namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%s %s", gr, name)
	}
	return fmt.Sprintf("%s %s/%s", gr, namespace, name)
}
