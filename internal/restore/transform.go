package restore

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// serverSetMetadata is metadata the API server assigns; a restored object
// gets its own.
var serverSetMetadata = []string{
	"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
}

var (
	grServices   = schema.GroupResource{Resource: "services"}
	grPods       = schema.GroupResource{Resource: "pods"}
	grPVCs       = schema.GroupResource{Resource: "persistentvolumeclaims"}
	grPVs        = schema.GroupResource{Resource: "persistentvolumes"}
	grNamespaces = schema.GroupResource{Resource: "namespaces"}
	grJobs       = schema.GroupResource{Group: "batch", Resource: "jobs"}
	grCRDs       = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
)

// bindingAnnotations are written on claims and volumes by the PV
// controller of the source cluster; left in place they would stop the
// target's from binding.
var bindingAnnotations = []string{
	"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
	"volume.kubernetes.io/selected-node",
}

// jobControllerLabels tie a Job's selector and pods to the source Job's UID.
var jobControllerLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid"}

// transformer prepares backed-up objects for the target cluster. It is a
// pure function of the object and the restore's spec, so that the same
// normalisation can be applied to a live object when comparing the two.
type transformer struct {
	restore           *v1.Restore
	backupName        string
	namespaceMapping  map[string]string
	preserveNodePorts bool
}

func newTransformer(rs *v1.Restore, backupName string) *transformer {
	return &transformer{
		restore:           rs,
		backupName:        backupName,
		namespaceMapping:  rs.Spec.NamespaceMapping,
		preserveNodePorts: rs.Spec.PreserveNodePorts != nil && *rs.Spec.PreserveNodePorts,
	}
}

// targetNamespace is where items of namespace ns are restored to.
func (t *transformer) targetNamespace(ns string) string {
	if to, ok := t.namespaceMapping[ns]; ok && to != "" {
		return to
	}
	return ns
}

// target is where the restore creates an item stored at namespace ns
// (empty when cluster-scoped) and name: the mapping applied to what the
// item's archive path says, never to what its JSON says, since the path is
// what the restore's filters judged. A Namespace's name is mapped too.
func (t *transformer) target(gr schema.GroupResource, ns, name string) (string, string) {
	if ns != "" {
		ns = t.targetNamespace(ns)
	}
	if gr == grNamespaces {
		name = t.targetNamespace(name)
	}
	return ns, name
}

// prepare rewrites obj in place for creation. It leaves the object's
// identity alone (the caller places the object with target), so that it
// normalises a live object the same way. Owner references are handled by
// the caller, which knows what has been restored.
func (t *transformer) prepare(obj *unstructured.Unstructured, gr schema.GroupResource, info resourceInfo) {
	meta, _ := obj.Object["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj.Object["metadata"] = meta
	}
	for _, f := range serverSetMetadata {
		delete(meta, f)
	}
	if info.HasStatus {
		delete(obj.Object, "status")
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.BackupNameLabel] = v1.LabelValue(t.backupName)
	labels[v1.RestoreNameLabel] = v1.LabelValue(t.restore.Name)
	if gr == grNamespaces {
		// The API server keeps this label equal to the name; a mapped
		// namespace gets its new name here, as the server would set it
		// (target has renamed it already).
		labels[corev1.LabelMetadataName] = obj.GetName()
	}
	obj.SetLabels(labels)
	// Lifeboat's claimed-by annotation records which plugin handled a
	// volume in the backup; it is bookkeeping of that backup, not part of
	// the object, and a restored object carrying it would look handled to
	// the next backup.
	if ann := obj.GetAnnotations(); ann != nil {
		if _, ok := ann[volumehelper.ClaimedByAnnotation]; ok {
			delete(ann, volumehelper.ClaimedByAnnotation)
			obj.SetAnnotations(emptyToNil(ann))
		}
	}

	switch gr {
	case grServices:
		t.prepareService(obj)
	case grPods:
		unstructured.RemoveNestedField(obj.Object, "spec", "nodeName")
	case grPVCs:
		dropBindingAnnotations(obj)
	case grPVs:
		dropBindingAnnotations(obj)
		unstructured.RemoveNestedField(obj.Object, "spec", "claimRef", "uid")
		unstructured.RemoveNestedField(obj.Object, "spec", "claimRef", "resourceVersion")
		if ns, ok, _ := unstructured.NestedString(obj.Object, "spec", "claimRef", "namespace"); ok {
			_ = unstructured.SetNestedField(obj.Object, t.targetNamespace(ns), "spec", "claimRef", "namespace")
		}
	case grJobs:
		for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
			m, ok, _ := unstructured.NestedStringMap(obj.Object, path...)
			if !ok {
				continue
			}
			for _, l := range jobControllerLabels {
				delete(m, l)
			}
			_ = unstructured.SetNestedStringMap(obj.Object, m, path...)
		}
		// The API server generates the selector of a Job whose template
		// has no controller-uid labels; a selector left over from the
		// source cluster would no longer match anything.
		if manual, _, _ := unstructured.NestedBool(obj.Object, "spec", "manualSelector"); !manual {
			unstructured.RemoveNestedField(obj.Object, "spec", "selector")
		}
	}
}

func dropBindingAnnotations(obj *unstructured.Unstructured) {
	annotations := obj.GetAnnotations()
	for _, a := range bindingAnnotations {
		delete(annotations, a)
	}
	obj.SetAnnotations(emptyToNil(annotations))
}

// prepareService drops the addresses the source cluster allocated: the
// target allocates its own, and a taken IP or port would fail the create.
func (t *transformer) prepareService(obj *unstructured.Unstructured) {
	if ip, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterIP"); !strings.EqualFold(ip, "None") {
		unstructured.RemoveNestedField(obj.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(obj.Object, "spec", "clusterIPs")
	}
	if t.preserveNodePorts {
		return
	}
	unstructured.RemoveNestedField(obj.Object, "spec", "healthCheckNodePort")
	ports, ok, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
	if !ok {
		return
	}
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok {
			delete(m, "nodePort")
		}
	}
	_ = unstructured.SetNestedSlice(obj.Object, ports, "spec", "ports")
}

func emptyToNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
