// Command cleanup is an example of a DeleteItemAction that removes, when a
// backup is deleted, what a companion BackupItemAction created outside the
// backup. Both live in this one binary:
//
//   - example.io/receipt (BackupItemAction) creates, for every ConfigMap it
//     backs up, a Receipt custom resource (receipts.example.lifeboat.io,
//     CRD in receipt-crd.yaml) in the same namespace, labelled
//     velero.io/backup-name=<backup>;
//   - example.io/cleanup (DeleteItemAction) deletes that receipt when the
//     server hands it the ConfigMap from the backup being deleted.
//
// The receipt stands for anything a plugin makes during a backup that the
// backup itself does not hold: a snapshot in an external system, a record
// in another service, a lease. See README.md.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// The plugins' names.
const (
	ReceiptName = "example.io/receipt"
	CleanupName = "example.io/cleanup"
)

// The Receipt custom resource, as receipt-crd.yaml defines it.
var ReceiptResource = schema.GroupVersionResource{Group: "example.lifeboat.io", Version: "v1", Resource: "receipts"}

// ReceiptKind is the Receipt's kind.
const ReceiptKind = "Receipt"

// Labels on receipts.
const (
	// BackupNameLabel is Velero's label naming the backup an object
	// belongs to.
	BackupNameLabel = v1.BackupNameLabel
	// ReceiptLabel marks receipts, so that they can be listed apart from
	// anything else labelled with the backup's name.
	ReceiptLabel = "example.lifeboat.io/receipt"
	// ExcludeFromBackupLabel is Velero's opt-out. A receipt is bookkeeping
	// for the backup that made it: the backup must not hold it (it is
	// created while the backup is still listing, so whether the LIST saw
	// it would be down to timing), and a restore must not bring back a
	// receipt that no deletion would ever remove.
	ExcludeFromBackupLabel = "velero.io/exclude-from-backup"
)

// CallLogEnv names a file to which example.io/cleanup appends one line per
// call, "<backup> configmaps <namespace>/<name> <ok|error>", so that a test
// (or a person debugging a deletion) can see exactly which items the server
// passed. Unset, nothing is written.
const CallLogEnv = "CLEANUP_CALL_LOG"

// selector: the DeleteItemAction needs every ConfigMap the companion made a
// receipt for, which is every ConfigMap it was given.
var selector = api.ResourceSelector{IncludedResources: []string{"configmaps"}}

// callTimeout bounds each API call: the plugin interface gives no context.
const callTimeout = 30 * time.Second

func main() {
	newServer().Serve()
}

// newServer registers both plugins; the tests serve the same Server (with
// pkg/plugin/plugintest).
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterBackupItemAction(ReceiptName, func(log *slog.Logger) (api.BackupItemAction, error) {
			c, err := newClients()
			return &receipt{log: log, clients: c, now: time.Now}, err
		}).
		RegisterDeleteItemAction(CleanupName, func(log *slog.Logger) (api.DeleteItemAction, error) {
			c, err := newClients()
			return &cleanup{log: log, clients: c, callLog: os.Getenv(CallLogEnv)}, err
		})
}

// ReceiptObjectName is the receipt's name for a ConfigMap and a backup:
// the same inputs always give the same name, so the DeleteItemAction
// finds the receipt from the item alone, and a retried backup creates
// nothing twice.
func ReceiptObjectName(backup, namespace, configMap string) string {
	sum := sha256.Sum256([]byte(backup + "\x00" + namespace + "\x00" + configMap))
	return "receipt-" + hex.EncodeToString(sum[:])[:20]
}

// clients reach the cluster. Discovery is only asked after a create failed
// with NotFound, to tell a missing CRD from a missing namespace.
type clients struct {
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
}

func (c *clients) receipts(namespace string) dynamic.ResourceInterface {
	return c.dynamic.Resource(ReceiptResource).Namespace(namespace)
}

// ErrCRDMissing says what to do when the API server does not serve
// receipts.
var ErrCRDMissing = errors.New("the Receipt CRD (receipts.example.lifeboat.io) is not installed; " +
	"install it with `kubectl apply -f receipt-crd.yaml` (examples/plugins/cleanup/receipt-crd.yaml) and back up again")

// receiptsServed asks discovery whether the API server serves receipts.
func (c *clients) receiptsServed() (bool, error) {
	list, err := c.discovery.ServerResourcesForGroupVersion(ReceiptResource.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", ReceiptResource.GroupResource(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == ReceiptResource.Resource {
			return true, nil
		}
	}
	return false, nil
}

// NewReceipt is the receipt the BackupItemAction creates for a ConfigMap.
func NewReceipt(backup, namespace, configMap string, at time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"backup":     backup,
			"configMap":  configMap,
			"backedUpAt": at.UTC().Format(time.RFC3339),
		},
	}}
	u.SetAPIVersion(ReceiptResource.GroupVersion().String())
	u.SetKind(ReceiptKind)
	u.SetNamespace(namespace)
	u.SetName(ReceiptObjectName(backup, namespace, configMap))
	u.SetLabels(map[string]string{
		BackupNameLabel:        v1.LabelValue(backup),
		ReceiptLabel:           "true",
		ExcludeFromBackupLabel: "true",
	})
	return u
}

type receipt struct {
	log     *slog.Logger
	clients *clients
	now     func() time.Time
}

func (r *receipt) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute creates the receipt and stores the ConfigMap unchanged. An error
// fails the item, and so the backup partially: a backup whose receipts
// could not be written would leave nothing for the cleanup to find.
func (r *receipt) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	rec := NewReceipt(backup.Name, u.GetNamespace(), u.GetName(), r.now())
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := r.clients.receipts(rec.GetNamespace()).Create(ctx, rec, metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) {
		return u, nil, nil
	}
	if apierrors.IsNotFound(err) {
		// NotFound on a create is either the resource (no CRD) or the
		// namespace; only the first has a fix worth spelling out.
		served, derr := r.clients.receiptsServed()
		if derr == nil && !served {
			return nil, nil, fmt.Errorf("creating receipt %s/%s for ConfigMap %s: %w", rec.GetNamespace(), rec.GetName(), u.GetName(), ErrCRDMissing)
		}
	}
	return nil, nil, fmt.Errorf("creating receipt %s/%s for ConfigMap %s: %w", rec.GetNamespace(), rec.GetName(), u.GetName(), err)
}

type cleanup struct {
	log     *slog.Logger
	clients *clients
	// callLog is the file named by CLEANUP_CALL_LOG, or "".
	callLog string
	// mu keeps call-log lines whole: the server calls in parallel.
	mu sync.Mutex
}

func (c *cleanup) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute deletes the receipt of the ConfigMap. A receipt that is already
// gone is fine: deletions are retried, and a retry must not fail on what
// the first attempt removed. The same NotFound comes back when the CRD is
// not installed, and that is fine too: without the CRD no receipt exists.
func (c *cleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected item type %T", in.Item)
	}
	ns, name := u.GetNamespace(), ReceiptObjectName(in.Backup.Name, u.GetNamespace(), u.GetName())
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := c.clients.receipts(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("deleting receipt %s/%s of ConfigMap %s: %w", ns, name, u.GetName(), err)
	}
	c.record(in.Backup.Name, ns, u.GetName(), err)
	if err != nil {
		return err
	}
	c.log.Debug("receipt removed", "receipt", ns+"/"+name, "backup", in.Backup.Name)
	return nil
}

// record appends the call to the call log, if there is one. A log that
// cannot be written does not fail the deletion it only describes.
func (c *cleanup) record(backup, namespace, name string, callErr error) {
	if c.callLog == "" {
		return
	}
	result := "ok"
	if callErr != nil {
		result = "error"
	}
	line := fmt.Sprintf("%s configmaps %s/%s %s\n", backup, namespace, name, result)
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.callLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		c.log.Warn("writing the call log", "file", c.callLog, "error", err)
	}
}

// newClients connects to the cluster the server runs in: the in-cluster
// config when the server runs in a pod, else the kubeconfig file named by
// KUBECONFIG (the plugin process inherits the server's environment).
func newClients() (*clients, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		path := os.Getenv("KUBECONFIG")
		if path == "" {
			return nil, fmt.Errorf("no cluster to talk to: not running in a pod and KUBECONFIG is not set")
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("reading KUBECONFIG %s: %w", path, err)
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	return &clients{dynamic: dyn, discovery: disc}, nil
}
