package controller

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

// DeletionCluster is the deletion engine's access to the API server, in
// one namespace.
type DeletionCluster struct {
	Client client.Client
	// Reader reads around the cache (and must, for Secrets).
	Reader    client.Reader
	Namespace string
	// CredentialsDir holds the credential files handed to
	// VolumeSnapshotter plugins; empty means under the system temp dir.
	CredentialsDir string
}

var _ deletion.Cluster = (*DeletionCluster)(nil)

// SnapshotLocation implements deletion.Cluster. As Velero does, a location
// with spec.credential gets the secret's key written to a file whose path
// is passed as the config key credentialsFile.
func (c *DeletionCluster) SnapshotLocation(ctx context.Context, name string) (string, map[string]string, error) {
	var vsl v1.VolumeSnapshotLocation
	err := deletionCall(ctx, func(ctx context.Context) error {
		return c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &vsl)
	})
	if apierrors.IsNotFound(err) {
		return "", nil, fmt.Errorf("VolumeSnapshotLocation %q not found in namespace %q; recreate it so its snapshots can be deleted", name, c.Namespace)
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading VolumeSnapshotLocation %q: %w", name, err)
	}
	if vsl.Spec.Provider == "" {
		return "", nil, fmt.Errorf("VolumeSnapshotLocation %q: spec.provider is empty; set it to the VolumeSnapshotter plugin's name", name)
	}
	config := maps.Clone(vsl.Spec.Config)
	if sel := vsl.Spec.Credential; sel != nil {
		var secret corev1.Secret
		err := deletionCall(ctx, func(ctx context.Context) error {
			return c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: sel.Name}, &secret)
		})
		if err != nil {
			return "", nil, fmt.Errorf("VolumeSnapshotLocation %q: reading spec.credential secret %q: %w", name, sel.Name, err)
		}
		data, ok := secret.Data[sel.Key]
		if !ok {
			return "", nil, fmt.Errorf("VolumeSnapshotLocation %q: secret %q has no key %q (spec.credential.key)", name, sel.Name, sel.Key)
		}
		path, err := c.writeCredentials("vsl-"+name, sel, data)
		if err != nil {
			return "", nil, fmt.Errorf("VolumeSnapshotLocation %q: %w", name, err)
		}
		if config == nil {
			config = map[string]string{}
		}
		config["credentialsFile"] = path
	}
	return vsl.Spec.Provider, config, nil
}

// writeCredentials puts credentials where a plugin can read them, readable
// by the server's user only; written to a temporary file and renamed, so a
// plugin never reads half a file.
func (c *DeletionCluster) writeCredentials(owner string, sel *corev1.SecretKeySelector, data []byte) (string, error) {
	dir := c.CredentialsDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "lifeboat-credentials")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the credentials dir: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%s", c.Namespace, owner, sel.Name, sel.Key))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", fmt.Errorf("writing credentials for the plugin: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("writing credentials for the plugin: %w", err)
	}
	return path, nil
}

// Restores implements deletion.Cluster: the Restores whose spec.backupName
// is the backup, as Velero finds them.
func (c *DeletionCluster) Restores(ctx context.Context, backup string) ([]string, error) {
	var list v1.RestoreList
	if err := deletionCall(ctx, func(ctx context.Context) error {
		return c.Reader.List(ctx, &list, client.InNamespace(c.Namespace))
	}); err != nil {
		return nil, fmt.Errorf("listing restores: %w", err)
	}
	var out []string
	for _, rs := range list.Items {
		if rs.Spec.BackupName == backup {
			out = append(out, rs.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteRestore implements deletion.Cluster.
func (c *DeletionCluster) DeleteRestore(ctx context.Context, name string) error {
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	err := deletionCall(ctx, func(ctx context.Context) error { return c.Client.Delete(ctx, rs) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting restore %s/%s: %w", c.Namespace, name, err)
	}
	return nil
}

// RemoveBackup implements deletion.Cluster. The finalizer goes first (with
// an optimistic lock, so another controller's write is not undone), then
// the object, guarded by its UID so that a new backup created under the
// same name in the meantime is never deleted.
func (c *DeletionCluster) RemoveBackup(ctx context.Context, b *v1.Backup) error {
	var cur v1.Backup
	err := deletionCall(ctx, func(ctx context.Context) error { return c.Reader.Get(ctx, client.ObjectKeyFromObject(b), &cur) })
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != b.UID) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	if controllerutil.ContainsFinalizer(&cur, v1.BackupFinalizer) {
		orig := cur.DeepCopy()
		controllerutil.RemoveFinalizer(&cur, v1.BackupFinalizer)
		err := deletionCall(ctx, func(ctx context.Context) error {
			return c.Client.Patch(ctx, &cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("removing finalizer %s from backup %s/%s: %w", v1.BackupFinalizer, b.Namespace, b.Name, err)
		}
	}
	uid := cur.UID
	err = deletionCall(ctx, func(ctx context.Context) error {
		return c.Client.Delete(ctx, &cur, client.Preconditions{UID: &uid})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func deletionCall(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, deletionCallTimeout)
	defer cancel()
	return fn(ctx)
}
