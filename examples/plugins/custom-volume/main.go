// Command custom-volume is an example BackupItemAction that takes care of
// the data of the volumes a resource policy gives the `custom` action with
// its parameters, the way a plugin for a storage array or an external
// backup system would (see README.md).
//
// For each PersistentVolumeClaim it is asked about, it asks the backup's
// VolumeHelper (pkg/volumehelper) whether the claim's volume policy action
// is custom with the parameters it claims. If so it "handles" the volume —
// here it only decides what a real plugin would record — writes what it
// did into an annotation on the stored claim, and marks the claim as
// claimed, so the server knows the custom action was carried out:
//
//	example.lifeboat.io/custom-volume: {"handledBy":"example.io/custom-volume",...}
//	volumes.lifeboat.io/claimed-by: example.io/custom-volume
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/config"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// name is the plugin's name. It is a variable so that a second copy of the
// example can be built under another name (go build -ldflags
// "-X main.name=example.io/custom-volume-b"), to show two custom actions
// told apart by their parameters.
var name = "example.io/custom-volume"

// AnnotationKey holds the record of what the plugin did, as JSON.
const AnnotationKey = "example.lifeboat.io/custom-volume"

// Record is what the plugin writes into the annotation.
type Record struct {
	HandledBy string `json:"handledBy"`
	Backup    string `json:"backup"`
	// Volume is the PersistentVolume the claim is bound to.
	Volume       string `json:"volume,omitempty"`
	StorageClass string `json:"storageClass,omitempty"`
	// Parameters are the custom action's parameters from the policy.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Handle is where a real plugin would say how to find the copy of the
	// data (a snapshot ID in an external system, a path, ...).
	Handle string `json:"handle"`
}

func main() {
	newServer().Serve()
}

// newServer registers the plugin; the tests serve the same Server (with
// pkg/plugin/plugintest).
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterBackupItemAction(name, func(log *slog.Logger) (api.BackupItemAction, error) {
			return newCustomVolume(log)
		})
}

type customVolume struct {
	log    *slog.Logger
	client crclient.Client
	// match are the parameters that make a custom action this plugin's.
	match map[string]any

	mu      sync.Mutex
	helpers map[types.UID]volumehelper.VolumeHelper
}

func newCustomVolume(log *slog.Logger) (*customVolume, error) {
	cfg, err := config.KubeConfig()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("no cluster to read the backup's resource policy from: run the server in a pod or set KUBECONFIG")
	}
	c, err := crclient.New(cfg, crclient.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a Kubernetes client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a Kubernetes client: %w", err)
	}
	match, err := readMatch(cs)
	if err != nil {
		return nil, err
	}
	return &customVolume{log: log, client: c, match: match, helpers: map[types.UID]volumehelper.VolumeHelper{}}, nil
}

// readMatch reads the parameters this plugin claims from its ConfigMap
// (key "match", a JSON object); without one, it claims custom actions with
// the parameter handler set to its own name.
func readMatch(cs kubernetes.Interface) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := config.Get(ctx, cs, config.ServerNamespace(), api.KindBackupItemAction, name)
	if err != nil {
		return nil, err
	}
	if cm == nil || cm.Data["match"] == "" {
		return map[string]any{"handler": name}, nil
	}
	var match map[string]any
	if err := json.Unmarshal([]byte(cm.Data["match"]), &match); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: key match must be a JSON object of action parameters, e.g. {\"handler\": %q}: %w", cm.Namespace, cm.Name, name, err)
	}
	return match, nil
}

func (c *customVolume) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, nil
}

// helper returns the backup's VolumeHelper, built once per backup: it
// indexes the backup's pods once and remembers the volumes it looked up.
func (c *customVolume) helper(backup *v1.Backup) (volumehelper.VolumeHelper, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.helpers[backup.UID]; ok {
		return h, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := volumehelper.NewVolumeHelperForBackup(ctx, backup, c.client, c.log)
	if err != nil {
		return nil, err
	}
	c.helpers[backup.UID] = h
	return h, nil
}

func (c *customVolume) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	pvc, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	h, err := c.helper(backup)
	if err != nil {
		return nil, nil, err
	}
	mine, err := h.ShouldPerformCustomAction(pvc, volumehelper.PersistentVolumeClaims, c.match)
	if err != nil {
		return nil, nil, err
	}
	if !mine {
		return nil, nil, nil // unchanged: not this plugin's volume
	}
	_, _, params, err := h.GetActionParameters(pvc, volumehelper.PersistentVolumeClaims)
	if err != nil {
		return nil, nil, err
	}
	volume, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName")
	class, _, _ := unstructured.NestedString(pvc.Object, "spec", "storageClassName")

	// A real plugin copies or snapshots the volume's data here, in its own
	// way, and keeps the ID of the copy. This example copies nothing; its
	// handle only names the claim and the backup.
	rec := Record{
		HandledBy:    name,
		Backup:       backup.Name,
		Volume:       volume,
		StorageClass: class,
		Parameters:   params,
		Handle:       fmt.Sprintf("example-copy://%s/%s/%s", backup.Name, pvc.GetNamespace(), pvc.GetName()),
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	ann := pvc.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationKey] = string(data)
	pvc.SetAnnotations(ann)
	volumehelper.MarkClaimed(pvc, name)
	c.log.Debug("handled volume", "pvc", pvc.GetNamespace()+"/"+pvc.GetName(), "volume", volume)
	return pvc, nil, nil
}
