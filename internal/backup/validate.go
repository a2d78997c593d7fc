package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// Validate returns every problem with spec, one message per problem, each
// naming the field and what to do. Fields Lifeboat does not implement yet
// are refused rather than ignored: a backup that silently skipped a data
// mover or volume group snapshots would look fine until the day it is
// restored.
func Validate(spec *v1.BackupSpec) []string {
	var msgs []string
	unsupported := func(field, why string) {
		msgs = append(msgs, fmt.Sprintf("%s: not supported by Lifeboat yet (%s); remove the field", field, why))
	}
	msgs = append(msgs, hooks.ValidateBackupHooks(spec.Hooks.Resources)...)
	if len(spec.OrderedResources) > 0 {
		unsupported("spec.orderedResources", "items are stored in a fixed order")
	}
	if isTrue(spec.SnapshotMoveData) {
		unsupported("spec.snapshotMoveData", "there is no data mover")
	}
	if spec.DataMover != "" {
		unsupported("spec.datamover", "there is no data mover")
	}
	if spec.UploaderConfig != nil && spec.UploaderConfig.ParallelFilesUpload < 0 {
		msgs = append(msgs, fmt.Sprintf("spec.uploaderConfig.parallelFilesUpload: %d is negative; give the files the node agent reads at once, or 0 for one per CPU", spec.UploaderConfig.ParallelFilesUpload))
	}
	if spec.VolumeGroupSnapshotLabelKey != "" {
		unsupported("spec.volumeGroupSnapshotLabelKey", "volume group snapshots are not taken")
	}
	if len(spec.Metadata.Labels) > 0 {
		unsupported("spec.metadata.labels", "labels are not copied onto what the backup creates")
	}
	if spec.TTL.Duration < 0 {
		msgs = append(msgs, fmt.Sprintf("spec.ttl: %s is negative; use a positive duration such as 720h, or leave it empty for the default", spec.TTL.Duration))
	}
	// Names are resolved against discovery when the backup runs; here only
	// the shape of the filters is checked.
	_, errs := selection.NewResourceFilter(spec, nil)
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	if _, err := selection.NewLabelMatcher(spec); err != nil {
		msgs = append(msgs, err.Error())
	}
	return msgs
}

func isTrue(b *bool) bool { return b != nil && *b }

// ValidateVolumes checks what the backup's volume decisions depend on,
// reading from the cluster: the resource policy (every problem, each naming
// the ConfigMap, the policy and the field) and the volume snapshot
// locations. It returns the locations to record in
// spec.volumeSnapshotLocations.
func ValidateVolumes(ctx context.Context, c crclient.Reader, b *v1.Backup) (snapshotLocations []string, msgs []string) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pol, err := volumehelper.LoadPolicies(cctx, b, c)
	old := selection.OldResourceFilterFields(&b.Spec)
	if err == nil && pol != nil && pol.IncludeExcludePolicy != nil && len(old) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s: cannot be used with the resource policy's includeExcludePolicy (ConfigMap %s/%s), as in Velero; "+
			"filter with spec.included/excludedNamespaceScopedResources and spec.included/excludedClusterScopedResources instead, or remove includeExcludePolicy",
			strings.Join(old, ", "), b.Namespace, b.Spec.ResourcePolicy.Name))
	}
	// Velero refuses its fine-grained filters beside the old resource
	// filters too: resource types then belong in includeExcludePolicy.
	if fields := pol.FineGrainedFields(); err == nil && len(fields) > 0 && len(old) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s: cannot be used with the resource policy's %s (ConfigMap %s/%s), as in Velero; "+
			"list resource types in the policy's includeExcludePolicy or in spec.included/excludedNamespaceScopedResources and spec.included/excludedClusterScopedResources instead",
			strings.Join(old, ", "), strings.Join(fields, " and "), b.Namespace, b.Spec.ResourcePolicy.Name))
	}
	if err != nil {
		var verr *policy.ValidationError
		if errors.As(err, &verr) {
			for _, m := range verr.Messages() {
				msgs = append(msgs, "spec.resourcePolicy: "+m)
			}
		} else {
			msgs = append(msgs, "spec.resourcePolicy: "+err.Error())
		}
	}
	locs, lmsgs := ResolveSnapshotLocations(cctx, c, b)
	return locs, append(msgs, lmsgs...)
}
