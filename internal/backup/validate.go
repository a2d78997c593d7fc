package backup

import (
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/selection"
)

// Validate returns every problem with spec, one message per problem, each
// naming the field and what to do. Fields Lifeboat does not implement yet
// are refused rather than ignored: a backup that silently skipped hooks or
// volume snapshots would look fine until the day it is restored.
func Validate(spec *v1.BackupSpec) []string {
	var msgs []string
	unsupported := func(field, why string) {
		msgs = append(msgs, fmt.Sprintf("%s: not supported by Lifeboat yet (%s); remove the field", field, why))
	}
	if spec.Hooks != nil && len(spec.Hooks.Raw) > 0 && string(spec.Hooks.Raw) != "{}" && string(spec.Hooks.Raw) != "null" {
		unsupported("spec.hooks", "backup hooks are not run")
	}
	if len(spec.OrderedResources) > 0 {
		unsupported("spec.orderedResources", "items are stored in a fixed order")
	}
	if isTrue(spec.SnapshotVolumes) {
		unsupported("spec.snapshotVolumes", "no volume snapshotter is configured; set it to false")
	}
	if len(spec.VolumeSnapshotLocations) > 0 {
		unsupported("spec.volumeSnapshotLocations", "volume snapshots are not taken")
	}
	if isTrue(spec.DefaultVolumesToFsBackup) {
		unsupported("spec.defaultVolumesToFsBackup", "there is no file-system backup agent")
	}
	if isTrue(spec.DefaultVolumesToRestic) {
		unsupported("spec.defaultVolumesToRestic", "there is no file-system backup agent")
	}
	if isTrue(spec.SnapshotMoveData) {
		unsupported("spec.snapshotMoveData", "there is no data mover")
	}
	if spec.DataMover != "" {
		unsupported("spec.datamover", "there is no data mover")
	}
	if spec.UploaderConfig != nil && len(spec.UploaderConfig.Raw) > 0 && string(spec.UploaderConfig.Raw) != "{}" && string(spec.UploaderConfig.Raw) != "null" {
		unsupported("spec.uploaderConfig", "there is no file-system uploader")
	}
	if spec.ResourcePolicy != nil {
		unsupported("spec.resourcePolicy", "resource policies are not applied")
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
