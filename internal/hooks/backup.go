package hooks

import (
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/selection"
)

// BackupRules are a backup's spec.hooks.resources, resolved for one
// cluster.
type BackupRules struct {
	rules []backupRule
}

type backupRule struct {
	name      string
	sel       podSelector
	pre, post []v1.BackupResourceHook
}

// NewBackupRules resolves the spec's resource hooks; r resolves resource
// names as the backup's own filters do (nil keeps them as written).
func NewBackupRules(specs []v1.BackupResourceHookSpec, r selection.ResourceResolver) (*BackupRules, error) {
	out := &BackupRules{}
	for i, s := range specs {
		field := fmt.Sprintf("spec.hooks.resources[%d]", i)
		sel, err := newPodSelector(field, s.IncludedNamespaces, s.ExcludedNamespaces, s.LabelSelector)
		if err != nil {
			return nil, err
		}
		sel.resources = selection.NewIncludesExcludes(resolveResources(s.IncludedResources, r), resolveResources(s.ExcludedResources, r))
		out.rules = append(out.rules, backupRule{name: s.Name, sel: sel, pre: s.PreHooks, post: s.PostHooks})
	}
	return out, nil
}

// ValidateBackupHooks returns a message for each resource hook the server
// could not apply, naming the field and the fix.
func ValidateBackupHooks(specs []v1.BackupResourceHookSpec) []string {
	var msgs []string
	for i, s := range specs {
		field := fmt.Sprintf("spec.hooks.resources[%d]", i)
		if _, err := newPodSelector(field, s.IncludedNamespaces, s.ExcludedNamespaces, s.LabelSelector); err != nil {
			msgs = append(msgs, err.Error()+"; fix the selector")
		}
		for phase, list := range map[string][]v1.BackupResourceHook{"pre": s.PreHooks, "post": s.PostHooks} {
			for j, h := range list {
				if h.Exec == nil {
					continue
				}
				if len(h.Exec.Command) == 0 {
					msgs = append(msgs, fmt.Sprintf("%s.%s[%d].exec.command: empty; give the command and its arguments", field, phase, j))
				}
			}
		}
	}
	return msgs
}

// PodMeta is what hook selection reads of a pod.
type PodMeta struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
}

// ForPod returns the exec hooks of one phase for a pod, in the order they
// run, and a warning for each annotation it could not read. A pod that
// declares the phase's hook by annotations runs that hook and no hook of
// the spec; a pre hook may also use the unprefixed (legacy) annotations.
func (b *BackupRules) ForPod(pod PodMeta, phase Phase) (hooks []Exec, warnings []string) {
	if h, ok := backupHookFromAnnotations(pod, string(phase)+".", &warnings); ok {
		h.Phase = phase
		return []Exec{h}, warnings
	}
	if phase == PhasePre {
		if h, ok := backupHookFromAnnotations(pod, "", &warnings); ok {
			h.Phase = phase
			return []Exec{h}, warnings
		}
	}
	if b == nil {
		return nil, warnings
	}
	for _, r := range b.rules {
		if !r.sel.applies(pod.Namespace, pod.Labels) {
			continue
		}
		list := r.pre
		if phase == PhasePost {
			list = r.post
		}
		for i, h := range list {
			if h.Exec == nil {
				continue
			}
			hooks = append(hooks, Exec{
				Name: r.name, Source: SourceSpec, Phase: phase, Index: i,
				Container: h.Exec.Container, Command: h.Exec.Command, OnError: h.Exec.OnError, Timeout: h.Exec.Timeout.Duration,
			})
		}
	}
	return hooks, warnings
}

// Empty reports whether the spec declares no hook, so only annotations
// can give a pod hooks.
func (b *BackupRules) Empty() bool { return b == nil || len(b.rules) == 0 }

func backupHookFromAnnotations(pod PodMeta, prefix string, warnings *[]string) (Exec, bool) {
	a := pod.Annotations
	cmd := a[prefix+backupCommandKey]
	if cmd == "" {
		return Exec{}, false
	}
	name := pod.Namespace + "/" + pod.Name
	return Exec{
		Name: FromAnnotation, Source: SourceAnnotation,
		Container: a[prefix+backupContainerKey],
		Command:   parseCommand(cmd),
		OnError:   onErrorMode(a[prefix+backupOnErrorKey]),
		Timeout:   parseDuration(a, prefix+backupTimeoutKey, name, warnings),
	}, true
}
