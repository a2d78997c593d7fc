package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// widgetCRD is a namespaced custom resource type for the tests, installed
// once per package.
const (
	widgetGroup    = "example.lifeboat.io"
	widgetResource = "widgets"
	widgetVersion  = "v1alpha1"
)

func ensureWidgetCRD(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: widgetResource + "." + widgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: widgetResource, Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetVersion, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	ctx := testenv.Ctx(t)
	if err := env.Client.Create(ctx, crd); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating CRD: %v", err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", crd.Name, err)
	}
}

// ensureReceiptCRD installs the cleanup example's Receipt CRD from the
// file its README tells users to apply, and waits until it is served: the
// example's BackupItemAction fails every ConfigMap without it.
func ensureReceiptCRD(t *testing.T) {
	t.Helper()
	const file = "../../examples/plugins/cleanup/receipt-crd.yaml"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the Receipt CRD: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx := testenv.Ctx(t)
	if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", crd.Name, err)
	}
}

// sampleApp creates, in ns, one object of each kind the layout tests expect.
func sampleApp(t *testing.T, ns string) {
	t.Helper()
	ensureWidgetCRD(t)
	labels := map[string]string{"app": "demo"}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: labels}, Data: map[string]string{"greeting": "hello"}})
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token", Labels: labels}, StringData: map[string]string{"token": "s3cr3t"}})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner", Labels: labels}})
	env.Create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	})
	env.Create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	})
	w := &unstructured.Unstructured{}
	w.SetAPIVersion(widgetGroup + "/" + widgetVersion)
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName("gizmo")
	w.SetLabels(labels)
	_ = unstructured.SetNestedField(w.Object, "blue", "spec", "color")
	env.Create(t, w)
}

func clientMergeFrom(obj client.Object) client.Patch { return client.MergeFrom(obj) }

func clientKey(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: env.Namespace, Name: name}
}

func waitRestore(t *testing.T, name string) *v1.Restore {
	t.Helper()
	var rs v1.Restore
	err := wait.PollUntilContextTimeout(testenv.Ctx(t), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, clientKey(name), &rs); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return rs.Status.Phase != "" && rs.Status.Phase != v1.RestorePhaseNew && rs.Status.Phase != v1.RestorePhaseInProgress, nil
	})
	if err != nil {
		t.Fatalf("restore %s did not finish (phase %q): %v", name, rs.Status.Phase, err)
	}
	return &rs
}

func clientKeyIn(ns, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: name}
}
