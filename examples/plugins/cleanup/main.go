// Command cleanup is an example of a DeleteItemAction that removes, when a
// backup is deleted, what a companion BackupItemAction created outside the
// backup. Both live in this one binary:
//
//   - example.io/receipt (BackupItemAction) creates, for every ConfigMap it
//     backs up, a "receipt" ConfigMap in the same namespace, labelled
//     velero.io/backup-name=<backup>;
//   - example.io/cleanup (DeleteItemAction) deletes that receipt when the
//     server hands it the ConfigMap from the backup being deleted.
//
// The receipt stands for anything a plugin makes during a backup that the
// backup itself does not hold: a snapshot in an external system, a custom
// resource, a lease. See README.md.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
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

// Labels and annotations on receipts.
const (
	// BackupNameLabel is Velero's label naming the backup an object
	// belongs to.
	BackupNameLabel = "velero.io/backup-name"
	// ReceiptLabel marks receipts, so neither plugin acts on a receipt
	// when a later backup stores it.
	ReceiptLabel = "example.lifeboat.io/receipt"
	// ReceiptForAnnotation names the ConfigMap a receipt is for.
	ReceiptForAnnotation = "example.lifeboat.io/receipt-for"
)

// selector: ConfigMaps that are not receipts themselves.
var selector = api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "!" + ReceiptLabel}

func main() {
	framework.NewServer().
		RegisterBackupItemAction(ReceiptName, func(log *slog.Logger) (api.BackupItemAction, error) {
			client, err := newClient()
			return &receipt{log: log, client: client}, err
		}).
		RegisterDeleteItemAction(CleanupName, func(log *slog.Logger) (api.DeleteItemAction, error) {
			client, err := newClient()
			return &cleanup{log: log, client: client}, err
		}).
		Serve()
}

// ReceiptObjectName is the receipt's name for a ConfigMap and a backup:
// the same inputs always give the same name, so the DeleteItemAction
// finds the receipt from the item alone, and a retried backup creates
// nothing twice.
func ReceiptObjectName(backup, namespace, configMap string) string {
	sum := sha256.Sum256([]byte(backup + "\x00" + namespace + "\x00" + configMap))
	return "receipt-" + hex.EncodeToString(sum[:])[:20]
}

// labelValue is Velero's rule for putting a name in a label: a name longer
// than 63 characters is cut and ends in 6 characters of its hash.
func labelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:57] + hex.EncodeToString(sum[:])[:6]
}

type receipt struct {
	log    *slog.Logger
	client kubernetes.Interface
}

func (r *receipt) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute creates the receipt and stores the ConfigMap unchanged.
func (r *receipt) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   u.GetNamespace(),
			Name:        ReceiptObjectName(backup.Name, u.GetNamespace(), u.GetName()),
			Labels:      map[string]string{BackupNameLabel: labelValue(backup.Name), ReceiptLabel: "true"},
			Annotations: map[string]string{ReceiptForAnnotation: u.GetName()},
		},
		Data: map[string]string{"backup": backup.Name, "configMap": u.GetName(), "backedUpAt": time.Now().UTC().Format(time.RFC3339)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating receipt %s/%s for ConfigMap %s: %w", cm.Namespace, cm.Name, u.GetName(), err)
	}
	return u, nil, nil
}

type cleanup struct {
	log    *slog.Logger
	client kubernetes.Interface
}

func (c *cleanup) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute deletes the receipt of the ConfigMap. A receipt that is already
// gone is fine: deletions are retried, and a retry must not fail on what
// the first attempt removed.
func (c *cleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected item type %T", in.Item)
	}
	ns, name := u.GetNamespace(), ReceiptObjectName(in.Backup.Name, u.GetNamespace(), u.GetName())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting receipt %s/%s of ConfigMap %s: %w", ns, name, u.GetName(), err)
	}
	c.log.Debug("receipt removed", "receipt", ns+"/"+name, "backup", in.Backup.Name)
	return nil
}

// newClient connects to the cluster the server runs in: the in-cluster
// config when the server runs in a pod, else the kubeconfig file named by
// KUBECONFIG (the plugin process inherits the server's environment).
func newClient() (kubernetes.Interface, error) {
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
	return kubernetes.NewForConfig(cfg)
}
