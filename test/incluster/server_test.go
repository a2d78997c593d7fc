package incluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/install"
)

const serverNamespace = "velero"

// TestTheInstalledServerBacksUpRestoresAndDeletes: install from the local
// image with the cleanup plugin's image, then a backup (the plugin's
// BackupItemAction makes a Receipt), a restore into another namespace whose
// pod comes up, and the backup's deletion (the plugin's DeleteItemAction
// removes the Receipt, with permission granted through install's
// aggregated ClusterRole), all by the server in its pod, as its service
// account.
func TestTheInstalledServerBacksUpRestoresAndDeletes(t *testing.T) {
	store := storeDir(t)
	applyReceiptCRD(t)
	// An operator grants what a plugin needs beyond the server's own
	// rules by labelling a ClusterRole; the node's controller manager
	// aggregates it into install's role.
	create(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "receipt-cleanup", Labels: map[string]string{install.AggregateLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.lifeboat.io"}, Resources: []string{"receipts"}, Verbs: []string{"delete"}}},
	})

	lifeboat(t, "install", "--image", images["lifeboat"], "--image-pull-policy", "Never",
		"--plugins", images["lifeboat-plugin-cleanup"], "--use-filesystem", store, "--wait", "--timeout", "4m")
	var d appsv1.Deployment
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: install.ServerName}, &d)
	if d.Status.AvailableReplicas != 1 {
		t.Fatalf("after install --wait the server has %d available replicas", d.Status.AvailableReplicas)
	}

	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"greeting": "hello"}})
	create(t, shellPod("shop"))
	waitPodRunning(t, "shop", "web")

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "shop-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{"shop"}}}
	create(t, b)
	waitFor(t, b, "the backup to complete", func(b *v1.Backup) bool { return b.Status.Phase == v1.BackupPhaseCompleted })
	// One per ConfigMap: settings, and the kube-root-ca.crt the node's
	// controller manager puts in every namespace.
	var cms corev1.ConfigMapList
	if err := admin.List(ctx(t), &cms, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	if got := receipts(t, "shop"); len(got) != len(cms.Items) || len(got) < 1 {
		t.Fatalf("receipts after the backup: %v, want one per ConfigMap (%d; the cleanup plugin's BackupItemAction)", got, len(cms.Items))
	}
	if _, err := os.Stat(filepath.Join(store, "backups", "backups", "shop-1", "velero-backup.json")); err != nil {
		t.Errorf("the backup is not in the store on the node: %v", err)
	}

	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "shop-1-copy"},
		Spec: v1.RestoreSpec{BackupName: "shop-1", NamespaceMapping: map[string]string{"shop": "shop-copy"}}}
	create(t, rs)
	waitFor(t, rs, "the restore to complete", func(r *v1.Restore) bool { return r.Status.Phase == v1.RestorePhaseCompleted })
	waitPodRunning(t, "shop-copy", "web")

	lifeboat(t, "backup", "delete", "shop-1", "--confirm", "--wait")
	if got := receipts(t, "shop"); len(got) != 0 {
		t.Errorf("receipts after the deletion: %v, want none (the cleanup plugin's DeleteItemAction)", got)
	}
	if _, err := os.Stat(filepath.Join(store, "backups", "backups", "shop-1")); !os.IsNotExist(err) {
		t.Errorf("the backup's files are still in the store: %v", err)
	}

	if logs := serverLog(t); strings.Contains(logs, "forbidden") {
		t.Errorf("the server was refused something it needs:\n%s", logs)
	}

	// Waits for the namespace too: the tests after this one install again.
	uninstallAndWait(t)
	err := admin.Get(ctx(t), client.ObjectKeyFromObject(&d), &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the server's Deployment after uninstall: %v", err)
	}
}

// storeDir is the filesystem location's directory on the node: readable
// on the way down by the server's non-root user.
func storeDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "lifeboat-incluster-store-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func applyReceiptCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "plugins", "cleanup", "receipt-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	create(t, &crd)
	waitFor(t, &crd, "the Receipt CRD to be established", func(c *apiextensionsv1.CustomResourceDefinition) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

func shellPod(namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: images["lifeboat-test-shell"], ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/busybox", "sh", "-c", "echo hello > /data/greeting; exec /bin/busybox sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

func receipts(t *testing.T, namespace string) []string {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetAPIVersion("example.lifeboat.io/v1")
	list.SetKind("ReceiptList")
	if err := admin.List(ctx(t), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		names = append(names, r.GetName())
	}
	return names
}

// serverLog is the log of the server's container (and of its plugins).
func serverLog(t *testing.T) string {
	t.Helper()
	var pods corev1.PodList
	if err := admin.List(ctx(t), &pods, client.InNamespace(serverNamespace), client.MatchingLabels(install.ServerSelector())); err != nil || len(pods.Items) == 0 {
		t.Fatalf("the server's pod: %v (%d pods)", err, len(pods.Items))
	}
	cs := kubernetes.NewForConfigOrDie(node.Config)
	b, err := cs.CoreV1().Pods(serverNamespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: install.ServerName}).DoRaw(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := admin.Create(ctx(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(t *testing.T, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := admin.Get(ctx(t), key, obj); err != nil {
		t.Fatal(err)
	}
}

func waitPodRunning(t *testing.T, namespace, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	waitFor(t, p, "pod "+namespace+"/"+name+" to run", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// waitFor polls obj until done says so, for up to three minutes.
func waitFor[T client.Object](t *testing.T, obj T, what string, done func(T) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(t), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return done(obj), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last seen: %+v)", what, err, obj)
	}
}
