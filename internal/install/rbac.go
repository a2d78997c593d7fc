package install

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Grant is one RBAC rule of the server and the reason it exists. The
// reasons are the documentation: docs/install.md lists each one word for
// word (a test holds the two together), so a rule cannot be added without
// saying why.
type Grant struct {
	Rule rbacv1.PolicyRule
	Why  string
}

// AggregateLabel marks ClusterRoles whose rules every Lifeboat server gets,
// through the aggregated ClusterRole install creates. Kinds the
// labelled-resource cleanup deletes, and what plugins call, are granted
// this way: install cannot know them.
const AggregateLabel = "lifeboat.io/aggregate-to-server"

// LeaseName is the leader-election Lease (server.LeaderElectionID; the
// server package is not imported here, which would pull in every engine).
const LeaseName = "lifeboat-server"

var (
	readVerbs  = []string{"get", "list"}
	writeVerbs = []string{"create", "patch"}
)

// ClusterGrants are the server's rules over the whole cluster.
func ClusterGrants(restoreRBAC bool) []Grant {
	grants := []Grant{
		// Backups LIST every served resource type, custom resources
		// included; restores GET an object that already exists to compare
		// it with the backup; the backup controller GETs a deleted Backup's
		// namespace, owners and the Backup CRD.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: readVerbs},
			Why: "get and list on every resource: a backup lists every resource type the API server serves, " +
				"custom resources installed after the server included, so no fixed list of kinds could name them; " +
				"restores read objects that already exist, and the backup controller reads a Backup's namespace, owners and CRD",
		},
		// Restores create whatever the backup holds (namespaces too), and
		// patch existing objects (existingResourcePolicy: update) and the
		// owner references of restored ones. The built-in CSI cleanup
		// creates VolumeSnapshotContents to have storage snapshots deleted
		// and patches contents' deletionPolicy and finalizers with it.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: writeVerbs},
			Why: "create and patch on every resource: a restore creates objects of any kind the backup holds, " +
				"patches existing ones when existingResourcePolicy is update and the owner references of what it restored; " +
				"a backup creates the CSI VolumeSnapshots of its claims and patches their contents (backup label, deletionPolicy Retain before removing them); " +
				"the CSI snapshot cleanup creates a VolumeSnapshotContent from a deleted backup's stored one so the driver deletes its storage snapshot, " +
				"and patches a content's deletionPolicy before deleting it (and the finalizers of one whose VolumeSnapshot is gone)",
		},
		// Backup hooks and restore exec hooks run commands in pods. The
		// wildcard create above covers pods/exec already; the rule names
		// it so that hooks keep working if that rule is ever narrowed, and
		// so a reader of the role sees the server execs into pods.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}},
			Why: "create on pods/exec: backup hooks (pre and post, from pod annotations and spec.hooks) and restore exec hooks " +
				"run their commands in the pods' containers through the API server, as kubectl exec does",
		},
		// The built-in DeleteItemAction lifeboat.io/csi-snapshot-cleanup.
		{
			Rule: rbacv1.PolicyRule{
				APIGroups: []string{"snapshot.storage.k8s.io"},
				Resources: []string{"volumesnapshots", "volumesnapshotcontents"},
				Verbs:     []string{"delete"},
			},
			Why: "delete on volumesnapshots and volumesnapshotcontents: the built-in DeleteItemAction " +
				"lifeboat.io/csi-snapshot-cleanup deletes the CSI snapshots a deleted backup took, and a backup removes its own from the cluster once stored " +
				"(the storage snapshots kept) or deletes them when it fails; " +
				"no other delete is granted outside the server's namespace",
		},
	}
	if restoreRBAC {
		// Without these, the API server refuses to create a Role or a
		// binding that grants more than the server holds: a RoleBinding
		// to the built-in edit role already does (edit may delete).
		grants = append(grants, Grant{
			Rule: rbacv1.PolicyRule{
				APIGroups: []string{"rbac.authorization.k8s.io"},
				Resources: []string{"roles", "clusterroles"},
				Verbs:     []string{"bind", "escalate"},
			},
			Why: "bind and escalate on roles and clusterroles (--restore-rbac, on by default): a restore creates Roles, " +
				"ClusterRoles and bindings from the backup, and the API server refuses any that grants more than the server " +
				"holds, such as a RoleBinding to the built-in edit role",
		})
	}
	return grants
}

// NamespaceGrants are the server's rules in its own namespace.
func NamespaceGrants() []Grant {
	return []Grant{
		// Every controller reads and writes the velero.io objects of its
		// namespace (status subresources included) and the manager's cache
		// lists and watches them; deletions remove Backups, Restores and
		// DeleteBackupRequests.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"velero.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			Why: "every verb on velero.io resources, status included, in the server's namespace: the controllers watch, " +
				"create, update, patch and delete Backups, Restores, DeleteBackupRequests, Schedules and the other velero.io objects there",
		},
		// Location credentials are Secrets; resource policies, plugin
		// configuration and the labelled-resource cleanup's kinds are
		// ConfigMaps, all in the server's namespace. Plugins (processes of
		// the server, with its service account) may watch theirs.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
			Why: "get, list and watch on secrets and configmaps in the server's namespace: location credentials, resource policies, " +
				"plugin configuration and the labelled-resource cleanup's configuration live there",
		},
		// Leader election: the Lease is created once, then read and
		// renewed by name (create cannot be limited to a name).
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			Why:  "create on leases in the server's namespace: leader election creates the Lease " + LeaseName + " the first time",
		},
		{
			Rule: rbacv1.PolicyRule{
				APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: []string{LeaseName}, Verbs: []string{"get", "update", "patch"},
			},
			Why: "get, update and patch on the Lease " + LeaseName + ": the leader renews it, standbys read it, and a server " +
				"that stops releases it so a standby takes over at once",
		},
		// Leader election records events on the Lease; the controllers on
		// the objects they act on.
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			Why:  "create, patch and update on events in the server's namespace: leader election records when a server becomes the leader, and the server records what happens to Backups, Restores and DeleteBackupRequests (all in its namespace) for `kubectl describe` and `kubectl get events`",
		},
	}
}

func rules(grants []Grant) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(grants))
	for i, g := range grants {
		out[i] = g.Rule
	}
	return out
}
