package framework

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// ErrAsyncOperationsNotSupported is what Progress of a v1 action adapted to
// v2 returns: a v1 action never starts an operation, so any operation ID
// asked about is not its own.
var ErrAsyncOperationsNotSupported = errors.New("plugin does not support asynchronous operations")

// AdaptableTo returns the newer kinds under which a plugin of kind is also
// found, as in Velero: a v1 BackupItemAction or RestoreItemAction is listed
// by its binary under its v1 kind only, and a host that wants every v2
// action takes the v1 ones too, calling them through their v1 service and
// AdaptBackupItemAction or AdaptRestoreItemAction (BackupItemActionV2Client
// and RestoreItemActionV2Client do that when given a v1 Dispenser).
//
// A binary must not list a v1 action under the v2 kind as well: Velero's
// host would then run it twice.
func AdaptableTo(kind api.Kind) []api.Kind {
	switch kind {
	case api.KindBackupItemAction:
		return []api.Kind{api.KindBackupItemActionV2}
	case api.KindRestoreItemAction:
		return []api.Kind{api.KindRestoreItemActionV2}
	}
	return nil
}

// AdaptBackupItemAction presents the v1 action a, called name, as a v2
// action: Execute starts no operation, Progress fails with
// ErrAsyncOperationsNotSupported, Cancel does nothing.
func AdaptBackupItemAction(name string, a api.BackupItemAction) api.BackupItemActionV2 {
	return &adaptedBackupItemAction{name: name, v1: a}
}

type adaptedBackupItemAction struct {
	name string
	v1   api.BackupItemAction
}

func (a *adaptedBackupItemAction) adapted() any { return a.v1 }

func (a *adaptedBackupItemAction) Name() string { return a.name }

func (a *adaptedBackupItemAction) AppliesTo() (api.ResourceSelector, error) { return a.v1.AppliesTo() }

func (a *adaptedBackupItemAction) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	updated, additional, err := a.v1.Execute(item, backup)
	return updated, additional, "", nil, err
}

func (a *adaptedBackupItemAction) Progress(string, *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{}, ErrAsyncOperationsNotSupported
}

func (a *adaptedBackupItemAction) Cancel(string, *v1.Backup) error { return nil }

// AdaptRestoreItemAction presents the v1 action a, called name, as a v2
// action: Progress fails with ErrAsyncOperationsNotSupported, Cancel does
// nothing, and additional items are always ready.
func AdaptRestoreItemAction(name string, a api.RestoreItemAction) api.RestoreItemActionV2 {
	return &adaptedRestoreItemAction{name: name, v1: a}
}

type adaptedRestoreItemAction struct {
	name string
	v1   api.RestoreItemAction
}

func (a *adaptedRestoreItemAction) adapted() any { return a.v1 }

func (a *adaptedRestoreItemAction) Name() string { return a.name }

func (a *adaptedRestoreItemAction) AppliesTo() (api.ResourceSelector, error) { return a.v1.AppliesTo() }

func (a *adaptedRestoreItemAction) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	return a.v1.Execute(in)
}

func (a *adaptedRestoreItemAction) Progress(string, *v1.Restore) (api.OperationProgress, error) {
	return api.OperationProgress{}, ErrAsyncOperationsNotSupported
}

func (a *adaptedRestoreItemAction) Cancel(string, *v1.Restore) error { return nil }

func (a *adaptedRestoreItemAction) AreAdditionalItemsReady([]api.ResourceIdentifier, *v1.Restore) (bool, error) {
	return true, nil
}
