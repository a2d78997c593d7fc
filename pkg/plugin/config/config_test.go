package config

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, Labels: labels}}
}

func TestGet(t *testing.T) {
	ctx := context.Background()
	mine := configMap("mine", map[string]string{Label: "", "example.io/annotate": string(api.KindBackupItemAction)})
	other := configMap("other", map[string]string{Label: "", "example.io/annotate": string(api.KindRestoreItemAction)})
	unlabelled := configMap("plain", map[string]string{"example.io/annotate": string(api.KindBackupItemAction)})
	client := fake.NewSimpleClientset(mine, other, unlabelled)

	got, err := Get(ctx, client, "velero", api.KindBackupItemAction, "example.io/annotate")
	if err != nil || got == nil || got.Name != "mine" {
		t.Fatalf("Get = %v, %v; want the ConfigMap labelled for the BackupItemAction", got, err)
	}
	if got, err := Get(ctx, client, "velero", api.KindDeleteItemAction, "example.io/annotate"); err != nil || got != nil {
		t.Errorf("no ConfigMap for the kind: got %v, %v", got, err)
	}

	dup := configMap("dup", map[string]string{Label: "", "example.io/annotate": string(api.KindBackupItemAction)})
	if _, err := Get(ctx, fake.NewSimpleClientset(mine, dup), "velero", api.KindBackupItemAction, "example.io/annotate"); err == nil || !strings.Contains(err.Error(), "keep one") {
		t.Errorf("two ConfigMaps: err %v", err)
	}
}
