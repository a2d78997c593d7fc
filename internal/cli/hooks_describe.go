package cli

import (
	"encoding/json"
	"strings"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// describeBackupHooks lists a backup's spec.hooks, as Velero's describe
// does: each resource hook's selection, then its pre and post commands.
// Every line starts with indent (a schedule's template is indented).
func describeBackupHooks(d *describer, indent string, hooks v1.BackupHooks) {
	if len(hooks.Resources) == 0 {
		d.line("%sHooks:\t%s", indent, none)
		return
	}
	d.line("%sHooks:", indent)
	d.line("%s  Resources:", indent)
	for _, r := range hooks.Resources {
		describeHookSelection(d, indent, r.Name, r.IncludedNamespaces, r.ExcludedNamespaces, r.IncludedResources, r.ExcludedResources, selectorString(r.LabelSelector))
		for _, phase := range []struct {
			name  string
			hooks []v1.BackupResourceHook
		}{{"Pre", r.PreHooks}, {"Post", r.PostHooks}} {
			for _, h := range phase.hooks {
				if h.Exec == nil {
					continue
				}
				d.line("%s      %s Exec Hook:", indent, phase.name)
				d.line("%s        Container:\t%s", indent, valueOr(h.Exec.Container, "<first container>"))
				d.line("%s        Command:\t%s", indent, strings.Join(h.Exec.Command, " "))
				d.line("%s        On Error:\t%s", indent, valueOr(string(h.Exec.OnError), none))
				d.line("%s        Timeout:\t%s", indent, durationOr(h.Exec.Timeout.Duration.String(), h.Exec.Timeout.Duration == 0, "30s (default)"))
			}
		}
	}
}

// describeRestoreHooks lists a restore's spec.hooks.
func describeRestoreHooks(d *describer, hooks v1.RestoreHooks) {
	if len(hooks.Resources) == 0 {
		d.line("Hooks:\t%s", none)
		return
	}
	d.line("Hooks:")
	d.line("  Resources:")
	for _, r := range hooks.Resources {
		describeHookSelection(d, "", r.Name, r.IncludedNamespaces, r.ExcludedNamespaces, r.IncludedResources, r.ExcludedResources, selectorString(r.LabelSelector))
		for _, h := range r.PostHooks {
			if h.Init != nil {
				d.line("      Init Hook:")
				for _, raw := range h.Init.InitContainers {
					var c struct {
						Name    string   `json:"name"`
						Image   string   `json:"image"`
						Command []string `json:"command"`
					}
					_ = json.Unmarshal(raw.Raw, &c)
					d.line("        Init Container:\t%s (image %s): %s", valueOr(c.Name, none), valueOr(c.Image, none), strings.Join(c.Command, " "))
				}
			}
			if e := h.Exec; e != nil {
				d.line("      Exec Hook:")
				d.line("        Container:\t%s", valueOr(e.Container, "<first container>"))
				d.line("        Command:\t%s", strings.Join(e.Command, " "))
				d.line("        On Error:\t%s", valueOr(string(e.OnError), none))
				d.line("        Exec Timeout:\t%s", durationOr(e.ExecTimeout.Duration.String(), e.ExecTimeout.Duration == 0, "30s (default)"))
				d.line("        Wait Timeout:\t%s", durationOr(e.WaitTimeout.Duration.String(), e.WaitTimeout.Duration == 0, "as long as the restore waits"))
				d.line("        Wait For Ready:\t%t", e.WaitForReady != nil && *e.WaitForReady)
			}
		}
	}
}

func describeHookSelection(d *describer, indent, name string, inNS, exNS, inRes, exRes []string, selector string) {
	d.line("%s    %s:", indent, name)
	d.line("%s      Namespaces:", indent)
	d.line("%s        Included:\t%s", indent, listOr(inNS, "*"))
	d.line("%s        Excluded:\t%s", indent, listOr(exNS, none))
	d.line("%s      Resources:", indent)
	d.line("%s        Included:\t%s", indent, listOr(inRes, "*"))
	d.line("%s        Excluded:\t%s", indent, listOr(exRes, none))
	d.line("%s      Label selector:\t%s", indent, selector)
}

func durationOr(s string, zero bool, fallback string) string {
	if zero {
		return fallback
	}
	return s
}

// describeHookStatus prints the hook counts of a backup or restore that
// ran, as Velero's describe does.
func describeHookStatus(d *describer, s *v1.HookStatus) {
	if s == nil {
		return
	}
	d.blank()
	d.line("HooksAttempted:\t%d", s.HooksAttempted)
	d.line("HooksFailed:\t%d", s.HooksFailed)
}
