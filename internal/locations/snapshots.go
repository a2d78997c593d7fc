package locations

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
)

// SnapshotLocation reads the VolumeSnapshotLocation called name, around the
// cache, and returns the VolumeSnapshotter to use (spec.provider) and the
// config to Init it with: spec.config plus, when the location has
// spec.credential, credentialsFile naming a file that holds the secret
// key's bytes, as Velero passes it. Backup, restore and deletion all open
// snapshot locations here, so a snapshot is taken, restored from and
// deleted with the same credentials.
func (r *Resolver) SnapshotLocation(ctx context.Context, name string) (provider string, config map[string]string, err error) {
	loc := credentials.Location{Kind: credentials.SnapshotLocation, Namespace: r.Namespace, Name: name}
	var vsl v1.VolumeSnapshotLocation
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = r.SecretReader.Get(cctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &vsl)
	cancel()
	if apierrors.IsNotFound(err) {
		// Its credentials, if a missed event left them, go with it.
		if r.Credentials != nil {
			_ = r.Credentials.Remove(loc)
		}
		return "", nil, fmt.Errorf("VolumeSnapshotLocation %q not found in namespace %q; create it again (provider, config and credential as before) to reach the snapshots taken through it", name, r.Namespace)
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading VolumeSnapshotLocation %q: %w", name, err)
	}
	if vsl.Spec.Provider == "" {
		return "", nil, fmt.Errorf("VolumeSnapshotLocation %q: spec.provider is empty; set it to the VolumeSnapshotter plugin's name", name)
	}
	config = maps.Clone(vsl.Spec.Config)
	if sel := vsl.Spec.Credential; sel != nil {
		data, err := r.secretKey(ctx, "VolumeSnapshotLocation", vsl.Namespace, name, "spec.credential", sel)
		if err != nil {
			return "", nil, err
		}
		path, err := r.writeCredentials(loc, sel, data)
		if err != nil {
			return "", nil, err
		}
		if config == nil {
			config = map[string]string{}
		}
		config[credentials.ConfigKey] = path
	}
	return vsl.Spec.Provider, config, nil
}
