package api

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is a plugin kind, as named in the go-plugin plugin map.
type Kind string

// The plugin kinds of Velero's protocol.
const (
	KindObjectStore         Kind = "ObjectStore"
	KindVolumeSnapshotter   Kind = "VolumeSnapshotter"
	KindBackupItemAction    Kind = "BackupItemAction"
	KindBackupItemActionV2  Kind = "BackupItemActionV2"
	KindRestoreItemAction   Kind = "RestoreItemAction"
	KindRestoreItemActionV2 Kind = "RestoreItemActionV2"
	KindDeleteItemAction    Kind = "DeleteItemAction"
	KindItemBlockAction     Kind = "ItemBlockAction"
	KindPluginLister        Kind = "PluginLister"
)

// AllKinds lists the kinds a plugin binary can serve, in a stable order.
var AllKinds = []Kind{
	KindObjectStore, KindVolumeSnapshotter, KindBackupItemAction, KindBackupItemActionV2,
	KindRestoreItemAction, KindRestoreItemActionV2, KindDeleteItemAction, KindItemBlockAction,
}

// ResourceSelector says which items an action applies to. Resource names
// are resolved through discovery to "resource.group"; excludes win; empty
// or "*" includes match everything; cluster-scoped items match only when
// the namespace filter includes every namespace. LabelSelector is a label
// selector in its string form ("app=web,tier!=db").
type ResourceSelector struct {
	IncludedNamespaces []string
	ExcludedNamespaces []string
	IncludedResources  []string
	ExcludedResources  []string
	LabelSelector      string
}

// ResourceIdentifier names one object: an additional item an action wants
// backed up or restored with the current one.
type ResourceIdentifier struct {
	schema.GroupResource
	Namespace string
	Name      string
}

func (r ResourceIdentifier) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s", r.GroupResource, r.Name)
	}
	return fmt.Sprintf("%s %s/%s", r.GroupResource, r.Namespace, r.Name)
}

// OperationProgress is how far an asynchronous operation, started by a v2
// action, has come.
type OperationProgress struct {
	Completed bool
	// Err is the operation's error, empty when it has none.
	Err            string
	NCompleted     int64
	NTotal         int64
	OperationUnits string
	Description    string
	Started        time.Time
	Updated        time.Time
}
