package restore

import "sort"

// priorities is Velero's default restore order: what others depend on
// comes first (definitions before instances, namespaces before their
// content, volumes before claims before pods). Types not listed follow in
// name order.
var priorities = []string{
	"customresourcedefinitions.apiextensions.k8s.io",
	"namespaces",
	"storageclasses.storage.k8s.io",
	"volumesnapshotclasses.snapshot.storage.k8s.io",
	"volumesnapshotcontents.snapshot.storage.k8s.io",
	"volumesnapshots.snapshot.storage.k8s.io",
	"persistentvolumes",
	"persistentvolumeclaims",
	"serviceaccounts",
	"secrets",
	"configmaps",
	"limitranges",
	"pods",
	"replicasets.apps",
	"clusterclasses.cluster.x-k8s.io",
	"endpoints",
	"services",
}

// nonRestorable are never restored, as in Velero: they belong to the
// cluster they were taken from (nodes, events) or to the backup tool itself.
var nonRestorable = map[string]bool{
	"nodes":                            true,
	"events":                           true,
	"events.events.k8s.io":             true,
	"backups.velero.io":                true,
	"restores.velero.io":               true,
	"resticrepositories.velero.io":     true,
	"backuprepositories.velero.io":     true,
	"csinodes.storage.k8s.io":          true,
	"volumeattachments.storage.k8s.io": true,
	"deletebackuprequests.velero.io":   true,
	"downloadrequests.velero.io":       true,
	"serverstatusrequests.velero.io":   true,
	"podvolumebackups.velero.io":       true,
	"podvolumerestores.velero.io":      true,
	"datauploads.velero.io":            true,
	"datadownloads.velero.io":          true,
}

// restoreOrder sorts the group-resources of a backup into restore order.
func restoreOrder(grs []string) []string {
	rank := make(map[string]int, len(priorities))
	for i, p := range priorities {
		rank[p] = i
	}
	out := append([]string(nil), grs...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, iok := rank[out[i]]
		rj, jok := rank[out[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return out[i] < out[j]
	})
	return out
}
