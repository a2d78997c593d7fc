package framework

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Every fake answers with its id, so a test can tell which plugin of a
// kind a request reached.

type fakeObjectStore struct {
	id      string
	mu      sync.Mutex
	config  map[string]string
	objects map[string][]byte
	// received counts bytes PutObject has read so far, for streaming tests.
	received chan int
	putErr   error
	// getBody, when set, replaces the stored object on GetObject.
	getBody func() io.Reader
}

func newFakeObjectStore(id string) *fakeObjectStore {
	return &fakeObjectStore{id: id, objects: map[string][]byte{}}
}

func (s *fakeObjectStore) Init(config map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = config
	return nil
}

func (s *fakeObjectStore) PutObject(bucket, key string, body io.Reader) error {
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		n, err := body.Read(chunk)
		buf.Write(chunk[:n])
		if n > 0 && s.received != nil {
			select {
			case s.received <- buf.Len():
			default:
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.mu.Lock()
			s.putErr = err
			s.mu.Unlock()
			return fmt.Errorf("storing %s/%s: %w", bucket, key, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[bucket+"/"+key] = buf.Bytes()
	return nil
}

func (s *fakeObjectStore) ObjectExists(bucket, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[bucket+"/"+key]
	return ok, nil
}

func (s *fakeObjectStore) GetObject(bucket, key string) (io.ReadCloser, error) {
	if s.getBody != nil {
		return io.NopCloser(s.getBody()), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.objects[bucket+"/"+key]
	if !ok {
		return nil, fmt.Errorf("%s: object %s/%s not found", s.id, bucket, key)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (s *fakeObjectStore) ListCommonPrefixes(bucket, prefix, delimiter string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.objects {
		rest, ok := strings.CutPrefix(k, bucket+"/"+prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, delimiter); i >= 0 {
			p := prefix + rest[:i+len(delimiter)]
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *fakeObjectStore) ListObjects(bucket, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.objects {
		if key, ok := strings.CutPrefix(k, bucket+"/"); ok && strings.HasPrefix(key, prefix) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *fakeObjectStore) DeleteObject(bucket, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, bucket+"/"+key)
	return nil
}

func (s *fakeObjectStore) CreateSignedURL(bucket, key string, ttl time.Duration) (string, error) {
	return fmt.Sprintf("https://%s.example/%s/%s?ttl=%s", s.id, bucket, key, ttl), nil
}

type fakeVolumeSnapshotter struct {
	id     string
	config map[string]string
	tags   map[string]string
}

func (v *fakeVolumeSnapshotter) Init(config map[string]string) error {
	v.config = config
	return nil
}

func (v *fakeVolumeSnapshotter) CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (string, error) {
	iopsText := "none"
	if iops != nil {
		iopsText = fmt.Sprint(*iops)
	}
	return fmt.Sprintf("%s:vol-from-%s-%s-%s-%s", v.id, snapshotID, volumeType, volumeAZ, iopsText), nil
}

func (v *fakeVolumeSnapshotter) GetVolumeInfo(volumeID, volumeAZ string) (string, *int64, error) {
	if volumeID == "no-iops" {
		return v.id + ":gp3", nil, nil
	}
	iops := int64(3000)
	return v.id + ":io2", &iops, nil
}

func (v *fakeVolumeSnapshotter) CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (string, error) {
	v.tags = tags
	return fmt.Sprintf("%s:snap-of-%s-%s", v.id, volumeID, volumeAZ), nil
}

func (v *fakeVolumeSnapshotter) DeleteSnapshot(snapshotID string) error {
	if snapshotID == "missing" {
		return fmt.Errorf("%s: snapshot %s does not exist", v.id, snapshotID)
	}
	return nil
}

func (v *fakeVolumeSnapshotter) GetVolumeID(pv runtime.Unstructured) (string, error) {
	id, _, err := unstructured.NestedString(pv.UnstructuredContent(), "spec", "csi", "volumeHandle")
	return v.id + ":" + id, err
}

func (v *fakeVolumeSnapshotter) SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
	u := &unstructured.Unstructured{Object: pv.UnstructuredContent()}
	if err := unstructured.SetNestedField(u.Object, v.id+":"+volumeID, "spec", "csi", "volumeHandle"); err != nil {
		return nil, err
	}
	return u, nil
}

func selectorFor(id string) api.ResourceSelector {
	return api.ResourceSelector{
		IncludedNamespaces: []string{"ns-" + id},
		ExcludedNamespaces: []string{"kube-system"},
		IncludedResources:  []string{"res-" + id},
		ExcludedResources:  []string{"secrets"},
		LabelSelector:      "plugin=" + id,
	}
}

func ref(resource, namespace, name string) api.ResourceIdentifier {
	return api.ResourceIdentifier{GroupResource: schema.GroupResource{Resource: resource}, Namespace: namespace, Name: name}
}

// annotated returns item with the annotation "<id>/backup": backup.
func annotated(id string, item runtime.Unstructured, backup string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: item.UnstructuredContent()}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[id+"/backup"] = backup
	u.SetAnnotations(annotations)
	return u
}

type fakeBIA struct{ id string }

func (b *fakeBIA) AppliesTo() (api.ResourceSelector, error) { return selectorFor(b.id), nil }

func (b *fakeBIA) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	if item.(*unstructured.Unstructured).GetName() == "unchanged" {
		return nil, nil, nil
	}
	return annotated(b.id, item, backup.Name), []api.ResourceIdentifier{ref("secrets", "default", b.id)}, nil
}

type fakeBIAV2 struct {
	id        string
	cancelled []string
}

func (b *fakeBIAV2) Name() string                             { return "ignored: the host names the plugin" }
func (b *fakeBIAV2) AppliesTo() (api.ResourceSelector, error) { return selectorFor(b.id), nil }

func (b *fakeBIAV2) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	return annotated(b.id, item, backup.Name), []api.ResourceIdentifier{ref("secrets", "default", b.id)},
		b.id + "-op", []api.ResourceIdentifier{ref("volumesnapshots", "default", b.id)}, nil
}

func (b *fakeBIAV2) Progress(operationID string, backup *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{
		Completed: true, NCompleted: 7, NTotal: 9, OperationUnits: "GiB",
		Description: b.id + " " + operationID + " of " + backup.Name, Started: testTime, Updated: testTime.Add(time.Minute),
	}, nil
}

func (b *fakeBIAV2) Cancel(operationID string, backup *v1.Backup) error {
	b.cancelled = append(b.cancelled, operationID+"@"+backup.Name)
	return nil
}

type fakeRIA struct{ id string }

func (r *fakeRIA) AppliesTo() (api.ResourceSelector, error) { return selectorFor(r.id), nil }

func (r *fakeRIA) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	if in.ItemFromBackup.(*unstructured.Unstructured).GetName() != "from-backup" {
		return nil, fmt.Errorf("%s: itemFromBackup did not arrive", r.id)
	}
	return &api.RestoreItemActionExecuteOutput{
		UpdatedItem:     annotated(r.id, in.Item, in.Restore.Name),
		AdditionalItems: []api.ResourceIdentifier{ref("persistentvolumeclaims", "default", r.id)},
		SkipRestore:     r.id == "b",
	}, nil
}

type fakeRIAV2 struct{ id string }

func (r *fakeRIAV2) Name() string                             { return "ignored" }
func (r *fakeRIAV2) AppliesTo() (api.ResourceSelector, error) { return selectorFor(r.id), nil }

func (r *fakeRIAV2) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	return &api.RestoreItemActionExecuteOutput{
		UpdatedItem:                 annotated(r.id, in.Item, in.Restore.Name),
		AdditionalItems:             []api.ResourceIdentifier{ref("persistentvolumeclaims", "default", r.id)},
		OperationID:                 r.id + "-op",
		WaitForAdditionalItems:      true,
		AdditionalItemsReadyTimeout: 90 * time.Second,
	}, nil
}

func (r *fakeRIAV2) Progress(operationID string, restore *v1.Restore) (api.OperationProgress, error) {
	return api.OperationProgress{Description: r.id + " " + operationID + " of " + restore.Name, Err: "half done"}, nil
}

func (r *fakeRIAV2) Cancel(operationID string, restore *v1.Restore) error {
	return fmt.Errorf("%s cannot cancel %s", r.id, operationID)
}

func (r *fakeRIAV2) AreAdditionalItemsReady(items []api.ResourceIdentifier, restore *v1.Restore) (bool, error) {
	return len(items) == 1 && items[0].Name == r.id && restore.Name == "nightly-restore", nil
}

type fakeDIA struct {
	id   string
	mu   sync.Mutex
	seen []string
}

func (d *fakeDIA) AppliesTo() (api.ResourceSelector, error) { return selectorFor(d.id), nil }

func (d *fakeDIA) Execute(in *api.DeleteItemActionExecuteInput) error {
	u := in.Item.(*unstructured.Unstructured)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, u.GetNamespace()+"/"+u.GetName()+"@"+in.Backup.Name)
	return nil
}

func (d *fakeDIA) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

type fakeIBA struct{ id string }

func (i *fakeIBA) Name() string                             { return "ignored" }
func (i *fakeIBA) AppliesTo() (api.ResourceSelector, error) { return selectorFor(i.id), nil }

func (i *fakeIBA) GetRelatedItems(item runtime.Unstructured, backup *v1.Backup) ([]api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	return []api.ResourceIdentifier{ref("persistentvolumeclaims", u.GetNamespace(), i.id+"-"+u.GetName()+"-"+backup.Name)}, nil
}
