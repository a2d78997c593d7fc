package restore

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The bucket is untrusted input. The restore's filters judge an item by its
// archive path (resources/<resource.group>/[<version>/]namespaces/<ns>/<name>.json
// or .../cluster/<name>.json), and the item is created where its path says,
// through the namespace mapping. So an item whose JSON names another
// namespace, name, group, version or kind, or whose type the cluster serves
// at another scope than its path claims, is refused: creating it would put
// something the filters never admitted somewhere the mapping never said.
// Velero's own backups always agree, since Velero writes the path from the
// object.

// checkStored checks the stored JSON against the item's path, before the
// cluster is asked about the type. It returns the item's group-version.
func checkStored(it spooledItem, gr schema.GroupResource, obj *unstructured.Unstructured) (schema.GroupVersion, error) {
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	switch {
	case err != nil || gv.Version == "":
		return gv, refusal(it, "its apiVersion %q is not a group/version", obj.GetAPIVersion())
	case gv.Group != gr.Group:
		return gv, refusal(it, "its apiVersion %q is not in the group of %s, the resource its path names", obj.GetAPIVersion(), gr)
	case it.Version != "" && gv.Version != it.Version:
		return gv, refusal(it, "its apiVersion %q is not %s, the version its path names", obj.GetAPIVersion(), it.Version)
	case obj.GetNamespace() != it.Namespace && it.Namespace == "":
		return gv, refusal(it, "its path stores it as cluster-scoped, but its JSON says namespace %q", obj.GetNamespace())
	case obj.GetNamespace() == "" && it.Namespace != "":
		return gv, refusal(it, "its path stores it in namespace %q, but its JSON has no namespace", it.Namespace)
	case obj.GetNamespace() != it.Namespace:
		return gv, refusal(it, "its path stores it in namespace %q, but its JSON says namespace %q", it.Namespace, obj.GetNamespace())
	case obj.GetName() != it.Name:
		return gv, refusal(it, "its path names it %q, but its JSON names it %q", it.Name, obj.GetName())
	}
	return gv, nil
}

// checkServed checks the item against how the cluster serves its type.
func checkServed(it spooledItem, obj *unstructured.Unstructured, info resourceInfo) error {
	gr := info.GVR.GroupResource()
	switch {
	case obj.GetKind() != info.Kind:
		return refusal(it, "its kind %q is not %s, the kind of %s", obj.GetKind(), info.Kind, gr)
	case info.Namespaced && it.Namespace == "":
		return refusal(it, "%s is namespaced in this cluster, but its path stores it as cluster-scoped", gr)
	case !info.Namespaced && it.Namespace != "":
		return refusal(it, "%s is cluster-scoped in this cluster, but its path stores it in namespace %q", gr, it.Namespace)
	}
	return nil
}

func refusal(it spooledItem, format string, args ...any) error {
	return fmt.Errorf("archive entry %q refused, nothing of it restored: %s; an item's path, its JSON and the scope of its type must agree "+
		"(was the backup changed in its storage location? restore it from an unaltered copy)", it.Path, fmt.Sprintf(format, args...))
}
