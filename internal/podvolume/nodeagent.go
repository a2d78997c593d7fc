package podvolume

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Velero's label on the node agent's pods: its backup and restore look for
// a pod so labelled on the node of the pod whose volumes they move.
const (
	NodeAgentRoleLabel = "role"
	NodeAgentRole      = "node-agent"
)

// NoNodeAgentError: no node agent pod runs on the node. The backup and
// the restore both refuse to leave a transfer to a node agent that is not
// there, rather than wait for it until their timeout.
type NoNodeAgentError struct {
	Node, Namespace string
}

func (e *NoNodeAgentError) Error() string {
	return fmt.Sprintf("no node agent runs on node %s (in namespace %s, pods labelled %s=%s): install it with `lifeboat install --use-node-agent`",
		e.Node, e.Namespace, NodeAgentRoleLabel, NodeAgentRole)
}

// IsNoNodeAgent tells a missing node agent from a failure to look.
func IsNoNodeAgent(err error) bool {
	var e *NoNodeAgentError
	return errors.As(err, &e)
}

// NodeAgentOn returns nil when a node agent pod of namespace (the server's)
// runs on node, as Velero's nodeagent.IsRunningOnNode decides: a pod
// labelled role=node-agent, scheduled there, Running and not being
// deleted. Otherwise the error is a *NoNodeAgentError, or the listing's.
func NodeAgentOn(ctx context.Context, c client.Reader, namespace, node string) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{NodeAgentRoleLabel: NodeAgentRole}); err != nil {
		return fmt.Errorf("listing the node agent's pods (namespace %s, label %s=%s): %w", namespace, NodeAgentRoleLabel, NodeAgentRole, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return nil
		}
	}
	return &NoNodeAgentError{Node: node, Namespace: namespace}
}
