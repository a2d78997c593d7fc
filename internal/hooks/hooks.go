// Package hooks decides and runs Velero's hooks: the exec hooks a backup
// runs in a pod before and after storing it, and the init containers and
// exec hooks a restore gives the pods it creates. Which hooks apply to a
// pod is decided here, from the pod's annotations and the spec's resource
// hooks, by Velero v1.18's rules (pure functions, table tested); the
// commands run through the API server's pods/exec (exec.go).
package hooks

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/selection"
)

// Phase is when a backup hook runs relative to its pod's item.
type Phase string

// Backup hook phases; restore exec hooks have none.
const (
	PhasePre  Phase = "pre"
	PhasePost Phase = "post"
)

// Where a hook was declared, as Velero's hook tracker names it.
const (
	SourceAnnotation = "annotation"
	SourceSpec       = "spec"
	// FromAnnotation is the name of a hook declared by annotations.
	FromAnnotation = "<from-annotation>"
)

// DefaultExecTimeout bounds a command whose hook gives no timeout, as in
// Velero.
const DefaultExecTimeout = 30 * time.Second

// Backup hook annotations, read with a "pre." or "post." prefix; the
// unprefixed form is the legacy spelling of a pre hook.
const (
	backupContainerKey = "hook.backup.velero.io/container"
	backupCommandKey   = "hook.backup.velero.io/command"
	backupOnErrorKey   = "hook.backup.velero.io/on-error"
	backupTimeoutKey   = "hook.backup.velero.io/timeout"
)

// Restore hook annotations.
const (
	restoreContainerKey    = "post.hook.restore.velero.io/container"
	restoreCommandKey      = "post.hook.restore.velero.io/command"
	restoreOnErrorKey      = "post.hook.restore.velero.io/on-error"
	restoreExecTimeoutKey  = "post.hook.restore.velero.io/exec-timeout"
	restoreWaitTimeoutKey  = "post.hook.restore.velero.io/wait-timeout"
	restoreWaitForReadyKey = "post.hook.restore.velero.io/wait-for-ready"
	initImageKey           = "init.hook.restore.velero.io/container-image"
	initNameKey            = "init.hook.restore.velero.io/container-name"
	initCommandKey         = "init.hook.restore.velero.io/command"
)

// Exec is one exec hook as it applies to one pod.
type Exec struct {
	// Name is the spec's resource hook name, or FromAnnotation.
	Name   string
	Source string
	// Phase is pre or post for a backup hook, empty for a restore's.
	Phase Phase
	// Index is the hook's position in its resource hook's list, so two
	// hooks of one resource hook are told apart.
	Index int
	// Container is where the command runs; empty means the pod's first
	// container (resolved when the hook runs).
	Container string
	Command   []string
	// OnError is as declared; empty behaves as Continue for whether later
	// hooks run and the pod is kept, as in Velero.
	OnError v1.HookErrorMode
	// Timeout bounds the command; zero is DefaultExecTimeout.
	Timeout time.Duration
	// WaitTimeout bounds a restore hook's wait for its container; zero
	// waits as long as the restore waits for hooks.
	WaitTimeout time.Duration
	// WaitForReady makes a restore hook wait for its container to be
	// ready, not only running.
	WaitForReady bool
}

// Describe names the hook for errors and logs: its phase, name and
// source, e.g. `pre hook "<from-annotation>" (annotation)`.
func (h Exec) Describe() string {
	s := fmt.Sprintf("hook %q (%s", h.Name, h.Source)
	if h.Source == SourceSpec {
		s += fmt.Sprintf(", #%d", h.Index)
	}
	s += ")"
	if h.Phase != "" {
		s = string(h.Phase) + " " + s
	}
	return s
}

func (h Exec) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return DefaultExecTimeout
}

// stopsOthers reports whether a failure of this hook stops the hooks after
// it (and, for a backup's pre hook, leaves the pod out).
func (h Exec) stopsOthers() bool { return h.OnError == v1.HookErrorModeFail }

// podSelector is a resource hook's choice of pods.
type podSelector struct {
	namespaces *selection.IncludesExcludes
	// resources holds group-resource strings ("pods"), as resolved.
	resources *selection.IncludesExcludes
	labels    labels.Selector
}

var podsGR = schema.GroupResource{Resource: "pods"}

func (s podSelector) applies(namespace string, podLabels map[string]string) bool {
	if !s.namespaces.ShouldInclude(namespace) {
		return false
	}
	if s.resources != nil && !s.resources.ShouldInclude(podsGR.String()) {
		return false
	}
	return s.labels == nil || s.labels.Matches(labels.Set(podLabels))
}

func newPodSelector(field string, includedNS, excludedNS []string, ls *metav1.LabelSelector) (podSelector, error) {
	s := podSelector{namespaces: selection.NewIncludesExcludes(includedNS, excludedNS)}
	if ls != nil {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return s, fmt.Errorf("%s.labelSelector: %w", field, err)
		}
		s.labels = sel
	}
	return s, nil
}

// resolveResources turns the names a user wrote into group-resource
// strings through discovery, as Velero does; a name discovery does not
// know is kept as written.
func resolveResources(names []string, r selection.ResourceResolver) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if r != nil && n != selection.All {
			if gr, _, err := r.ResolveResource(n); err == nil {
				out = append(out, gr.String())
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// parseCommand reads a command annotation: a JSON array of strings, or
// else the whole value as one word (Velero's rule: no shell splitting).
func parseCommand(value string) []string {
	if value == "" {
		return nil
	}
	if value[0] == '[' {
		var cmd []string
		if err := json.Unmarshal([]byte(value), &cmd); err == nil {
			return cmd
		}
	}
	return []string{value}
}

// onErrorMode keeps Continue and Fail; anything else is empty, as Velero
// reads the annotation.
func onErrorMode(s string) v1.HookErrorMode {
	switch m := v1.HookErrorMode(s); m {
	case v1.HookErrorModeContinue, v1.HookErrorModeFail:
		return m
	}
	return ""
}

// parseDuration reads an optional duration annotation; a bad value is
// ignored with a warning naming the annotation, as Velero ignores it.
func parseDuration(annotations map[string]string, key, pod string, warnings *[]string) time.Duration {
	s := annotations[key]
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		*warnings = append(*warnings, fmt.Sprintf("pod %s: annotation %s=%q is not a duration (such as 30s or 2m); the default is used", pod, key, s))
		return 0
	}
	return d
}
