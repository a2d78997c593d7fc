package config

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Label marks plugin configuration ConfigMaps.
const Label = "velero.io/plugin-config"

// Get returns the ConfigMap configuring the plugin name of kind in
// namespace, or nil when there is none. More than one is an error: the
// plugin could not know which to follow.
func Get(ctx context.Context, client kubernetes.Interface, namespace string, kind api.Kind, name string) (*corev1.ConfigMap, error) {
	selector := fmt.Sprintf("%s,%s=%s", Label, name, kind)
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing ConfigMaps labelled %s: %w", selector, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("%d ConfigMaps in namespace %s are labelled %s; keep one", len(list.Items), namespace, selector)
}
