package cli

import (
	"encoding/json"
	"strings"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// describeBackupHooks lists a backup's spec.hooks, as Velero's describe
// does: each resource hook's selection, then its pre and post commands.
func describeBackupHooks(d *describer, hooks v1.BackupHooks) {
	if len(hooks.Resources) == 0 {
		d.line("Hooks:\t%s", none)
		return
	}
	d.line("Hooks:")
	d.line("  Resources:")
	for _, r := range hooks.Resources {
		describeHookSelection(d, r.Name, r.IncludedNamespaces, r.ExcludedNamespaces, r.IncludedResources, r.ExcludedResources, selectorString(r.LabelSelector))
		for _, phase := range []struct {
			name  string
			hooks []v1.BackupResourceHook
		}{{"Pre", r.PreHooks}, {"Post", r.PostHooks}} {
			for _, h := range phase.hooks {
				if h.Exec == nil {
					continue
				}
				d.line("      %s Exec Hook:", phase.name)
				d.line("        Container:\t%s", valueOr(h.Exec.Container, "<first container>"))
				d.line("        Command:\t%s", strings.Join(h.Exec.Command, " "))
				d.line("        On Error:\t%s", valueOr(string(h.Exec.OnError), none))
				d.line("        Timeout:\t%s", durationOr(h.Exec.Timeout.Duration.String(), h.Exec.Timeout.Duration == 0, "30s (default)"))
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
		describeHookSelection(d, r.Name, r.IncludedNamespaces, r.ExcludedNamespaces, r.IncludedResources, r.ExcludedResources, selectorString(r.LabelSelector))
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

func describeHookSelection(d *describer, name string, inNS, exNS, inRes, exRes []string, selector string) {
	d.line("    %s:", name)
	d.line("      Namespaces:")
	d.line("        Included:\t%s", listOr(inNS, "*"))
	d.line("        Excluded:\t%s", listOr(exNS, none))
	d.line("      Resources:")
	d.line("        Included:\t%s", listOr(inRes, "*"))
	d.line("        Excluded:\t%s", listOr(exRes, none))
	d.line("      Label selector:\t%s", selector)
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
