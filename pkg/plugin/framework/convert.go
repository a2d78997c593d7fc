package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

func selectorToProto(s api.ResourceSelector) *generated.ResourceSelector {
	return &generated.ResourceSelector{
		IncludedNamespaces: s.IncludedNamespaces,
		ExcludedNamespaces: s.ExcludedNamespaces,
		IncludedResources:  s.IncludedResources,
		ExcludedResources:  s.ExcludedResources,
		Selector:           s.LabelSelector,
	}
}

func selectorFromProto(p *generated.ResourceSelector) api.ResourceSelector {
	return api.ResourceSelector{
		IncludedNamespaces: p.GetIncludedNamespaces(),
		ExcludedNamespaces: p.GetExcludedNamespaces(),
		IncludedResources:  p.GetIncludedResources(),
		ExcludedResources:  p.GetExcludedResources(),
		LabelSelector:      p.GetSelector(),
	}
}

func idsToProto(ids []api.ResourceIdentifier) []*generated.ResourceIdentifier {
	if len(ids) == 0 {
		return nil
	}
	out := make([]*generated.ResourceIdentifier, len(ids))
	for i, id := range ids {
		out[i] = &generated.ResourceIdentifier{Group: id.Group, Resource: id.Resource, Namespace: id.Namespace, Name: id.Name}
	}
	return out
}

func idsFromProto(ids []*generated.ResourceIdentifier) []api.ResourceIdentifier {
	if len(ids) == 0 {
		return nil
	}
	out := make([]api.ResourceIdentifier, len(ids))
	for i, id := range ids {
		out[i] = api.ResourceIdentifier{
			GroupResource: schema.GroupResource{Group: id.GetGroup(), Resource: id.GetResource()},
			Namespace:     id.GetNamespace(),
			Name:          id.GetName(),
		}
	}
	return out
}

// progressToProto always sends both timestamps, zero or not: Velero's host
// reads them without a nil check.
func progressToProto(p api.OperationProgress) *generated.OperationProgress {
	return &generated.OperationProgress{
		Completed:      p.Completed,
		Err:            p.Err,
		NCompleted:     p.NCompleted,
		NTotal:         p.NTotal,
		OperationUnits: p.OperationUnits,
		Description:    p.Description,
		Started:        timestamppb.New(p.Started),
		Updated:        timestamppb.New(p.Updated),
	}
}

func progressFromProto(p *generated.OperationProgress) api.OperationProgress {
	return api.OperationProgress{
		Completed:      p.GetCompleted(),
		Err:            p.GetErr(),
		NCompleted:     p.GetNCompleted(),
		NTotal:         p.GetNTotal(),
		OperationUnits: p.GetOperationUnits(),
		Description:    p.GetDescription(),
		Started:        timeFromProto(p.GetStarted()),
		Updated:        timeFromProto(p.GetUpdated()),
	}
}

// timeFromProto keeps an absent timestamp zero; AsTime alone would make it
// the Unix epoch.
func timeFromProto(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func encodeItem(what string, item runtime.Unstructured) ([]byte, error) {
	if item == nil {
		return nil, fmt.Errorf("encoding the %s: there is none", what)
	}
	// An item still in its wire form goes out as it came in.
	if raw, ok := item.(interface{ RawJSON() ([]byte, error) }); ok {
		data, err := raw.RawJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding the %s: %w", what, err)
		}
		return data, nil
	}
	data, err := encodeItemContent(item.UnstructuredContent())
	if err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", what, err)
	}
	return data, nil
}

// decodeItem decodes JSON the way Kubernetes does for unstructured objects
// (whole numbers become int64, not float64), so that an item a plugin reads
// looks like one read from the API server.
func decodeItem(what string, data []byte) (*unstructured.Unstructured, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("decoding the %s: it is empty", what)
	}
	if obj, ok := decodeItemObject(data); ok {
		return &unstructured.Unstructured{Object: obj}, nil
	}
	// Not a plain JSON object: the slow path says what is wrong with it.
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", what, err)
	}
	if obj == nil {
		return nil, errors.New("decoding the " + what + ": it is null")
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func encodeObject(what string, obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", what, err)
	}
	return data, nil
}

// lastBackup remembers the last backup decoded on the plugin side: a
// server sends the same backup with every item, and decoding it (managed
// fields and all) would otherwise cost more than the plugin's own work.
// Plugins get a copy, so one that changes it cannot affect the next call.
var lastBackup struct {
	sync.Mutex
	data   []byte
	backup *v1.Backup
}

func decodeBackup(data []byte) (*v1.Backup, error) {
	lastBackup.Lock()
	if lastBackup.backup != nil && bytes.Equal(lastBackup.data, data) {
		b := lastBackup.backup.DeepCopy()
		lastBackup.Unlock()
		return b, nil
	}
	lastBackup.Unlock()
	backup := new(v1.Backup)
	if err := json.Unmarshal(data, backup); err != nil {
		return nil, fmt.Errorf("decoding the backup: %w", err)
	}
	lastBackup.Lock()
	lastBackup.data, lastBackup.backup = bytes.Clone(data), backup.DeepCopy()
	lastBackup.Unlock()
	return backup, nil
}

func decodeRestore(data []byte) (*v1.Restore, error) {
	restore := new(v1.Restore)
	if err := json.Unmarshal(data, restore); err != nil {
		return nil, fmt.Errorf("decoding the restore: %w", err)
	}
	return restore, nil
}

// The request* decoders mark a request the plugin side cannot read as the
// host's fault (InvalidArgument, no stack).

func requestItem(what string, data []byte) (*unstructured.Unstructured, error) {
	item, err := decodeItem(what, data)
	if err != nil {
		return nil, badRequest(err)
	}
	return item, nil
}

func requestBackup(data []byte) (*v1.Backup, error) {
	backup, err := decodeBackup(data)
	if err != nil {
		return nil, badRequest(err)
	}
	return backup, nil
}

func requestRestore(data []byte) (*v1.Restore, error) {
	restore, err := decodeRestore(data)
	if err != nil {
		return nil, badRequest(err)
	}
	return restore, nil
}
