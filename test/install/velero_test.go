package install

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/testutil/velerocrds"
)

// veleroObjects are what a Velero user has: objects of every kind Velero's
// CRDs define, with the fields Lifeboat's CRDs lacked before they became a
// superset of Velero's (hooks, uploader settings, caCertRef, queue
// position, Velero's deprecated BSL status fields, init containers whose
// content no schema describes), status written as Velero's server writes
// it (with the object: no status subresource).
const veleroObjects = `
apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata: {name: velero-store, labels: {component: velero}}
spec:
  provider: aws
  objectStorage: {bucket: backups, prefix: cluster-a, caCertRef: {name: store-ca, key: ca.crt}}
  config: {region: minio, s3ForcePathStyle: "true", s3Url: "https://minio.example.com"}
  default: true
status: {phase: Available, accessMode: ReadWrite, lastSyncedRevision: 7b3f1c1e-0d6a-4b8e-9a55-1f0e2c3d4b5a}
---
apiVersion: velero.io/v1
kind: VolumeSnapshotLocation
metadata: {name: velero-snapshots}
spec: {provider: aws, config: {region: us-east-1}}
---
apiVersion: velero.io/v1
kind: Backup
metadata: {name: nightly-20240101, labels: {velero.io/schedule-name: nightly}}
spec:
  includedNamespaces: [shop]
  storageLocation: velero-store
  ttl: 720h0m0s
  uploaderConfig: {parallelFilesUpload: 4}
  hooks:
    resources:
    - name: freeze
      includedNamespaces: [shop]
      labelSelector: {matchLabels: {app: db}}
      pre:
      - exec: {container: db, command: [/sbin/fsfreeze, --freeze, /data], onError: Fail, timeout: 30s}
      post:
      - exec: {container: db, command: [/sbin/fsfreeze, --unfreeze, /data]}
status: {phase: Completed, queuePosition: 3, version: 1, formatVersion: 1.1.0, hookStatus: {hooksAttempted: 2}}
---
apiVersion: velero.io/v1
kind: Restore
metadata: {name: nightly-20240101-restore}
spec:
  backupName: nightly-20240101
  existingResourcePolicy: update
  resourcePolicy: {kind: configmap, name: restore-filters}
  uploaderConfig: {writeSparseFiles: true, parallelFilesDownload: 2}
  hooks:
    resources:
    - name: migrate
      postHooks:
      - init:
          timeout: 2m
          initContainers:
          - name: migrate
            image: example.com/migrate:1
            command: [/migrate, --up]
            securityContext: {runAsNonRoot: true}
      - exec: {command: [/bin/true], execTimeout: 1m, waitTimeout: 5m, waitForReady: true, onError: Continue}
status: {phase: Completed, warnings: 1}
---
apiVersion: velero.io/v1
kind: Schedule
metadata: {name: nightly}
spec:
  schedule: "0 1 * * *"
  useOwnerReferencesInBackup: false
  template:
    ttl: 720h0m0s
    uploaderConfig: {parallelFilesUpload: 8}
    hooks: {resources: [{name: h, pre: [{exec: {command: [/bin/sync]}}]}]}
status: {phase: Enabled, lastBackup: "2024-01-01T01:00:00Z"}
---
apiVersion: velero.io/v1
kind: DeleteBackupRequest
metadata: {name: nightly-20231201-x7k2p}
spec: {backupName: nightly-20231201}
status: {phase: Processed, errors: [the backup was not found]}
---
apiVersion: velero.io/v1
kind: DownloadRequest
metadata: {name: nightly-20240101-logs}
spec: {target: {kind: BackupLog, name: nightly-20240101}}
status: {phase: Processed, downloadURL: "https://minio.example.com/signed", expiration: "2024-01-01T02:00:00Z"}
---
apiVersion: velero.io/v1
kind: ServerStatusRequest
metadata: {name: velero-cli-abc12}
status: {phase: Processed, serverVersion: v1.18.3, plugins: [{name: velero.io/aws, kind: ObjectStore}]}
---
apiVersion: velero.io/v1
kind: PodVolumeBackup
metadata: {name: nightly-20240101-b8x9q, labels: {velero.io/backup-name: nightly-20240101}}
spec:
  node: node-1
  pod: {kind: Pod, namespace: shop, name: db-0, uid: 0b0e6c1a-7f3e-4c1b-8e7a-2a1d3c4b5e6f}
  volume: data
  backupStorageLocation: velero-store
  repoIdentifier: ""
  uploaderType: kopia
  tags: {backup: nightly-20240101}
status: {phase: Completed, snapshotID: 1a2b3c, progress: {totalBytes: 1048576, bytesDone: 1048576}, incrementalBytes: 4096}
---
apiVersion: velero.io/v1
kind: PodVolumeRestore
metadata: {name: nightly-20240101-restore-q2w3e}
spec:
  pod: {kind: Pod, namespace: shop, name: db-0}
  volume: data
  backupStorageLocation: velero-store
  repoIdentifier: ""
  uploaderType: kopia
  snapshotID: 1a2b3c
  sourceNamespace: shop
status: {phase: Completed, node: node-2}
---
apiVersion: velero.io/v1
kind: BackupRepository
metadata: {name: shop-velero-store-kopia-x1y2z}
spec: {volumeNamespace: shop, backupStorageLocation: velero-store, repositoryType: kopia, maintenanceFrequency: 1h0m0s}
status: {phase: Ready, recentMaintenance: [{result: Succeeded, message: ok}]}
---
apiVersion: velero.io/v2alpha1
kind: DataUpload
metadata: {name: nightly-20240101-d4f5g}
spec:
  snapshotType: CSI
  csiSnapshot: {volumeSnapshot: velero-data-db-0-abc, storageClass: fast, snapshotClass: csi-snap}
  sourcePVC: data-db-0
  sourceNamespace: shop
  backupStorageLocation: velero-store
  operationTimeout: 10m0s
status: {phase: Completed, nodeOS: linux, dataMoverResult: {sizeBytes: "1048576"}}
---
apiVersion: velero.io/v2alpha1
kind: DataDownload
metadata: {name: nightly-20240101-restore-h6j7k}
spec:
  targetVolume: {pvc: data-db-0, pv: "", namespace: shop}
  backupStorageLocation: velero-store
  snapshotID: 1a2b3c
  sourceNamespace: shop
  operationTimeout: 10m0s
  nodeOS: linux
status: {phase: Completed}
`

// TestInstallOverVelerosKeepsItsObjects installs Lifeboat where Velero is
// installed: Velero's own CRDs, with objects of every kind. Install
// replaces the CRDs with Lifeboat's and must prune nothing: every object
// and every field of it survives, and no CRD goes.
func TestInstallOverVelerosKeepsItsObjects(t *testing.T) {
	const ns = "lb-over-velero"
	crds, err := velerocrds.All()
	if err != nil {
		t.Fatal(err)
	}
	crdClient := crdClient(t)
	for _, c := range crds {
		if err := crdClient.Create(ctx(t), c, client.FieldOwner("velero-cli")); err != nil {
			t.Fatalf("creating Velero's CRD %s: %v", c.Name, err)
		}
	}
	t.Cleanup(func() { uninstallAll(t, ns) })
	established(t, crdClient, crds)

	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(veleroObjects, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		objs = append(objs, u)
	}
	if err := admin.Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]any{}
	for _, u := range objs {
		if err := admin.Create(ctx(t), u.DeepCopy(), client.FieldOwner("velero-server")); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		stored := read(t, u)
		if !contains(stored.Object, u.Object) {
			t.Fatalf("Velero's CRDs did not keep %s %s as created:\n%s", u.GetKind(), u.GetName(), fieldDiff(u.Object, stored.Object))
		}
		before[key(u)] = stored.Object
	}

	mustLifeboat(t, "install", "-n", ns, "--use-filesystem", filepath.Join(t.TempDir(), "store"))

	// The CRDs are Lifeboat's now, and Velero's are all still served.
	var backups apiextensionsv1.CustomResourceDefinition
	if err := crdClient.Get(ctx(t), client.ObjectKey{Name: "backups.velero.io"}, &backups); err != nil {
		t.Fatal(err)
	}
	if _, ok := backups.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["conditions"]; !ok {
		t.Error("the Backup CRD is still Velero's after install")
	}
	established(t, crdClient, crds)
	// What install applied takes effect at once in the API server's
	// handlers; read until the objects come back through Lifeboat's schema.
	err = wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, u := range objs {
			if got := read(t, u); !contains(got.Object, before[key(u)]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, u := range objs {
			got := read(t, u)
			if !contains(got.Object, before[key(u)]) {
				t.Errorf("%s %s lost fields to install:\n%s", u.GetKind(), u.GetName(), fieldDiff(before[key(u)], got.Object))
			}
		}
	}
	// And a Velero server's write (status with the object, no
	// subresource) still lands.
	dbr := objs[slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "DeleteBackupRequest" })]
	cur := read(t, dbr)
	if err := unstructured.SetNestedField(cur.Object, "InProgress", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := admin.Update(ctx(t), cur); err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(read(t, dbr).Object, "status", "phase"); phase != "InProgress" {
		t.Errorf("a status written with the object after install: phase %q, want InProgress", phase)
	}
}

func key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

func read(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, got); err != nil {
		t.Fatalf("reading %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return got
}

// crdClient is a client for CRDs (admin's scheme lacks them).
func crdClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func established(t *testing.T, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			var cur apiextensionsv1.CustomResourceDefinition
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &cur)
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("CRD %s is gone", crd.Name)
			}
			if err != nil {
				return false, err
			}
			ok := slices.ContainsFunc(cur.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
			})
			if !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Velero's CRDs: %v", err)
	}
}

// contains reports whether every field of want is in got with the same
// value (server-set metadata aside).
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if k == "resourceVersion" || k == "managedFields" || k == "generation" {
				continue
			}
			if !contains(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalNumber(got), normalNumber(want))
	}
}

// normalNumber makes YAML's and JSON's integers compare equal.
func normalNumber(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	return v
}

// fieldDiff lists the paths of want that got lacks or holds differently.
func fieldDiff(want, got map[string]any) string {
	var out []string
	var walk func(path string, w, g any)
	walk = func(path string, w, g any) {
		switch wv := w.(type) {
		case map[string]any:
			gv, _ := g.(map[string]any)
			for k, v := range wv {
				if k == "resourceVersion" || k == "managedFields" || k == "generation" {
					continue
				}
				walk(path+"."+k, v, gv[k])
			}
		default:
			if !contains(g, w) {
				out = append(out, fmt.Sprintf("  %s: %v, now %v", path, w, g))
			}
		}
	}
	walk("", want, got)
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestInstallRemovesTheStatusSubresourceOfEarlierCRDs: CRDs of an earlier
// Lifeboat release had a status subresource, which drops a Velero server's
// status writes. Installing again leaves Velero's shape, whether the
// earlier CRDs were applied by install (field manager lifeboat) or
// created by another tool (Helm creates a chart's crds/).
func TestInstallRemovesTheStatusSubresourceOfEarlierCRDs(t *testing.T) {
	for _, how := range []string{"applied by install", "created by Helm"} {
		t.Run(how, func(t *testing.T) {
			crds, err := crd.All()
			if err != nil {
				t.Fatal(err)
			}
			c := crdClient(t)
			for _, old := range crds {
				for i := range old.Spec.Versions {
					old.Spec.Versions[i].Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
				}
				var err error
				if how == "applied by install" {
					old.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
					u, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
					if cerr != nil {
						t.Fatal(cerr)
					}
					err = c.Apply(ctx(t), client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner("lifeboat"), client.ForceOwnership)
				} else {
					err = c.Create(ctx(t), old, client.FieldOwner("helm"))
				}
				if err != nil {
					t.Fatalf("installing the earlier CRD %s: %v", old.Name, err)
				}
			}
			t.Cleanup(func() { uninstallAll(t, "lb-crds-only") })
			var before apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx(t), client.ObjectKey{Name: "backups.velero.io"}, &before); err != nil {
				t.Fatal(err)
			}
			if s := before.Spec.Versions[0].Subresources; s == nil || s.Status == nil {
				t.Fatal("the earlier CRDs were not installed with a status subresource")
			}
			mustLifeboat(t, "install", "--crds-only")
			for _, want := range crds {
				var cur apiextensionsv1.CustomResourceDefinition
				if err := c.Get(ctx(t), client.ObjectKey{Name: want.Name}, &cur); err != nil {
					t.Fatal(err)
				}
				for _, v := range cur.Spec.Versions {
					if v.Subresources != nil && v.Subresources.Status != nil {
						t.Errorf("%s %s still has a status subresource after install", want.Name, v.Name)
					}
				}
			}
		})
	}
}
