// Command demoapp creates the sample workload that `make demo` backs up: a
// namespace with a ConfigMap, a Secret, a ServiceAccount, a Service and a
// Deployment. It is idempotent, so the demo can run again on the same cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	fs := flag.NewFlagSet("demoapp", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", ".lifeboat/kubeconfig", "kubeconfig of the cluster")
	ns := fs.String("namespace", "demo-app", "namespace to create the workload in")
	_ = fs.Parse(os.Args[1:])
	if err := run(*kubeconfig, *ns); err != nil {
		fmt.Fprintln(os.Stderr, "demoapp:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, ns string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	labels := map[string]string{"app": "shop"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-settings", Labels: labels},
			Data: map[string]string{"currency": "EUR", "greeting": "Welcome to the shop"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db", Labels: labels},
			StringData: map[string]string{"password": "demo-only"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop", Labels: labels}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop", Labels: labels},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop", Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{ServiceAccountName: "shop",
						Containers: []corev1.Container{{Name: "shop", Image: "nginx:1.27"}}},
				},
			}},
	}
	for _, o := range objs {
		kind := fmt.Sprintf("%T", o)
		if gvks, _, err := scheme.ObjectKinds(o); err == nil {
			kind = gvks[0].Kind
		}
		err := c.Create(ctx, o)
		switch {
		case apierrors.IsAlreadyExists(err):
			fmt.Printf("  exists   %-15s %s\n", kind, o.GetName())
		case err != nil:
			return fmt.Errorf("creating %s %s: %w", kind, o.GetName(), err)
		default:
			fmt.Printf("  created  %-15s %s\n", kind, o.GetName())
		}
	}
	return nil
}
