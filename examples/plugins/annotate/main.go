// Command annotate is an example BackupItemAction built with Lifeboat's
// plugin SDK. It annotates every item it applies to (by default ConfigMaps
// and Deployments) with the name of the backup that stored it:
//
//	example.lifeboat.io/backed-up-by: <backup name>
//
// The annotation is in the backed-up copy only: the object in the cluster is
// not changed. A restore brings the annotation back with the object.
//
// Both the resources and the annotation key can be changed with a plugin
// ConfigMap in the server's namespace (see README.md).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/config"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name, as `lifeboat plugin get` lists it and as its
// ConfigMap's label names it.
const Name = "example.io/annotate"

// The defaults, and the plugin ConfigMap's keys that change them.
const (
	DefaultAnnotation = "example.lifeboat.io/backed-up-by"
	AnnotationKey     = "annotation" // the annotation to set
	ResourcesKey      = "resources"  // comma-separated resources, e.g. "configmaps,deployments.apps"
)

// DefaultResources are the resources annotated without a ConfigMap.
var DefaultResources = []string{"configmaps", "deployments"}

func main() {
	newServer().Serve()
}

// newServer registers the plugin; the tests serve the same Server (with
// pkg/plugin/plugintest).
func newServer() *framework.Server {
	return framework.NewServer().RegisterBackupItemAction(Name, newAnnotate)
}

type annotate struct {
	log        *slog.Logger
	resources  []string
	annotation string
}

// newAnnotate runs on the first call the server makes to the plugin: it
// reads the plugin's ConfigMap once for the life of the process.
func newAnnotate(log *slog.Logger) (api.BackupItemAction, error) {
	a := &annotate{log: log, resources: DefaultResources, annotation: DefaultAnnotation}
	data, err := readConfig()
	if err != nil {
		return nil, err
	}
	for k, v := range data {
		switch k {
		case AnnotationKey:
			if errs := validation.IsQualifiedName(v); len(errs) > 0 {
				return nil, fmt.Errorf("plugin config %s=%q is not an annotation key: %s", k, v, strings.Join(errs, "; "))
			}
			a.annotation = v
		case ResourcesKey:
			a.resources = nil
			for r := range strings.SplitSeq(v, ",") {
				if r = strings.TrimSpace(r); r != "" {
					a.resources = append(a.resources, r)
				}
			}
			if len(a.resources) == 0 {
				return nil, fmt.Errorf("plugin config %s is empty; leave the key out for the default %v", k, DefaultResources)
			}
		default:
			return nil, fmt.Errorf("unknown plugin config key %q (known: %s, %s)", k, AnnotationKey, ResourcesKey)
		}
	}
	log.Debug("configured", "resources", a.resources, "annotation", a.annotation)
	return a, nil
}

// AppliesTo names resources as a user would (plural, optionally with the
// group); the server resolves them through discovery.
func (a *annotate) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: slices.Clone(a.resources)}, nil
}

// Execute returns the item with the annotation added; the server stores what
// is returned.
func (a *annotate) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[a.annotation] = backup.Name
	u.SetAnnotations(ann)
	return u, nil, nil
}

// readConfig returns the data of the plugin's ConfigMap: the one in the
// server's namespace labelled velero.io/plugin-config and
// "example.io/annotate: BackupItemAction". Without a cluster to ask (no
// in-cluster config and no KUBECONFIG), the defaults apply.
func readConfig() (map[string]string, error) {
	cfg, err := config.KubeConfig()
	if err != nil || cfg == nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := config.Get(ctx, client, config.ServerNamespace(), api.KindBackupItemAction, Name)
	if err != nil || cm == nil {
		return nil, err
	}
	return cm.Data, nil
}
