package main

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEntry(t *testing.T) {
	for _, tc := range []struct {
		path, kind, ns, name string
	}{
		{"resources/configmaps/namespaces/a/cm-1.json", "configmaps", "a", "cm-1"},
		{"resources/namespaces/cluster/a.json", "namespaces", "", "a"},
		// The preferred-version copy of the same items is read once only.
		{"resources/configmaps/v1-preferredversion/namespaces/a/cm-1.json", "", "", ""},
		{"resources/namespaces/v1-preferredversion/cluster/a.json", "", "", ""},
		{"resources/secrets/namespaces/a/s.json", "", "", ""},
		{"metadata/version", "", "", ""},
	} {
		kind, ns, name := entry(tc.path)
		if kind != tc.kind || ns != tc.ns || name != tc.name {
			t.Errorf("entry(%q) = %q, %q, %q; want %q, %q, %q", tc.path, kind, ns, name, tc.kind, tc.ns, tc.name)
		}
	}
}

func TestDryRunCreatesAreDryAndMeetExistingNamespaces(t *testing.T) {
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-v"}}
	objects := func() ([]*corev1.Namespace, []*corev1.ConfigMap) {
		return []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "a-v"}}},
			[]*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "a-v", Name: "cm-1"}}}
	}

	cs := fake.NewClientset(existing)
	ns, cms := objects()
	if err := createObjects(context.Background(), cs, options{workers: 2, dryRun: true}, ns, cms); err != nil {
		t.Fatalf("dry run over an existing namespace: %v", err)
	}
	creates := 0
	for _, a := range cs.Actions() {
		c, ok := a.(k8stesting.CreateActionImpl)
		if !ok {
			continue
		}
		creates++
		if !slices.Equal(c.CreateOptions.DryRun, []string{metav1.DryRunAll}) {
			t.Errorf("create of %s sent dryRun %v, want [All]", c.Resource.Resource, c.CreateOptions.DryRun)
		}
	}
	if creates != 2 {
		t.Errorf("%d creates sent, want the namespace and the ConfigMap", creates)
	}

	// Without --dry-run the floor creates into fresh namespaces: one that
	// exists is a fault of the benchmark.
	ns, cms = objects()
	err := createObjects(context.Background(), fake.NewClientset(existing), options{workers: 2}, ns, cms)
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating over an existing namespace without --dry-run: %v, want AlreadyExists", err)
	}
}
