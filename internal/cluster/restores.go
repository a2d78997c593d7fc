package cluster

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// RestoresOf names the Restores made from backup in namespace, sorted: those
// whose spec.backupName is the backup, as Velero finds them. The deletion
// removes exactly these, and `backup delete --force` names them, so both
// ask here. The read is bounded by CallTimeout.
func RestoresOf(ctx context.Context, r client.Reader, namespace, backup string) ([]string, error) {
	var list v1.RestoreList
	if err := Call(ctx, func(ctx context.Context) error {
		return r.List(ctx, &list, client.InNamespace(namespace))
	}); err != nil {
		return nil, fmt.Errorf("listing the restores of backup %q: %w", backup, err)
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
