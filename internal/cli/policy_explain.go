package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

type policyExplainOptions struct {
	policyFile        string
	policyConfigMap   string
	includeNamespaces []string
	excludeNamespaces []string
	snapshotVolumes   bool
	defaultFSBackup   bool
	backup            string
	output            string
}

// explainSpec is what the decisions depend on, from the flags or a backup.
type explainSpec struct {
	policies          *policy.Policies
	includeNamespaces []string
	excludeNamespaces []string
	// snapshotVolumes is nil when unset, which means true.
	snapshotVolumes *bool
	defaultFSBackup bool
	// resources are the backup's resource filters (from --backup), which
	// say whether it holds PersistentVolumes of their own; nil: the
	// namespace flags alone, as a backup with only those would be.
	resources *v1.BackupSpec
}

// volumeExplanation is one row of `policy explain`.
type volumeExplanation struct {
	Volume     string         `json:"volume"`
	Action     string         `json:"action"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Rule is the index of the matching volume policy; nil when none did.
	Rule    *int     `json:"rule"`
	Reasons []string `json:"reasons"`

	why string
}

func newPolicyExplainCommand(f *Factory) *cobra.Command {
	o := &policyExplainOptions{}
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Show the action a backup would take for each volume, and why",
		Long: "Evaluate a resource policy against the volumes in the cluster: for every PVC of\n" +
			"the namespaces in scope, every other pod volume there, and (when the backup would\n" +
			"hold cluster-scoped resources) every PersistentVolume no claim stands for, print the action a\n" +
			"backup would take (snapshot, fs-backup, skip or custom) and why: the volume\n" +
			"policy that matched and its conditions, or for every earlier policy the first\n" +
			"condition that failed, and the fallback used when none matched.\n\n" +
			"The policy is a file (--policy-file, as for `policy validate`) or a ConfigMap in\n" +
			"the -n namespace (--policy-configmap). The backup is described by flags, or by an\n" +
			"existing backup (--backup), whose spec.resourcePolicy is used unless a policy\n" +
			"flag is given.",
		Example: "  lifeboat policy explain --policy-file volume-policy.yaml --include-namespaces app\n" +
			"  lifeboat policy explain --policy-configmap my-policy --include-namespaces '*' -o json\n" +
			"  lifeboat policy explain --backup nightly-20260301",
		Args: cobra.NoArgs,
		RunE: runE(f, func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.policyFile, "policy-file", "", "resource policy file (policy YAML or a ConfigMap manifest; \"-\" for standard input)")
	fl.StringVar(&o.policyConfigMap, "policy-configmap", "", "name of the resource policy ConfigMap in the -n namespace")
	fl.StringSliceVar(&o.includeNamespaces, "include-namespaces", nil, "namespaces the backup would include, comma-separated (\"*\" for all)")
	fl.StringSliceVar(&o.excludeNamespaces, "exclude-namespaces", nil, "namespaces the backup would leave out, comma-separated")
	fl.BoolVar(&o.snapshotVolumes, "snapshot-volumes", true, "the backup's snapshotVolumes (default: unset, which snapshots)")
	fl.BoolVar(&o.defaultFSBackup, "default-volumes-to-fs-backup", false, "the backup's defaultVolumesToFsBackup")
	fl.StringVar(&o.backup, "backup", "", "take the namespaces, volume settings and resource policy from this existing backup")
	fl.StringVarP(&o.output, "output", "o", formatTable, "output format: table or json")
	return cmd
}

func (o *policyExplainOptions) run(cmd *cobra.Command, f *Factory) error {
	if err := checkFormat(o.output, formatTable, formatJSON); err != nil {
		return err
	}
	if o.policyFile != "" && o.policyConfigMap != "" {
		return errors.New("--policy-file and --policy-configmap cannot be combined; give one policy source")
	}
	fl := cmd.Flags()
	if o.backup != "" {
		for _, name := range []string{"include-namespaces", "exclude-namespaces", "snapshot-volumes", "default-volumes-to-fs-backup"} {
			if fl.Changed(name) {
				return fmt.Errorf("--%s cannot be combined with --backup, which sets it from the backup's spec", name)
			}
		}
	} else {
		if o.policyFile == "" && o.policyConfigMap == "" {
			return errors.New("no policy given: use --policy-file FILE or --policy-configmap NAME (or --backup NAME to use the backup's resource policy)")
		}
		if len(o.includeNamespaces) == 0 {
			return errors.New("no namespaces given: use --include-namespaces (\"*\" for all) or --backup NAME")
		}
	}

	var spec explainSpec
	policyGiven := o.policyFile != "" || o.policyConfigMap != ""
	if o.policyFile != "" {
		data, err := readPolicyFile(cmd, o.policyFile)
		if err != nil {
			return fmt.Errorf("--policy-file: %w", err)
		}
		p, err := policy.ParseFile(data)
		if err != nil {
			return fmt.Errorf("--policy-file %s: invalid resource policy:\n%w", o.policyFile, err)
		}
		spec.policies = p
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if o.policyConfigMap != "" {
		if spec.policies, err = loadPolicyConfigMap(ctx, c, f.Namespace, o.policyConfigMap); err != nil {
			return err
		}
	}
	if o.backup != "" {
		b, err := backupKind.get(ctx, c, f.Namespace, o.backup)
		if err != nil {
			return err
		}
		if !policyGiven {
			callCtx, cancel := callCtx(ctx)
			spec.policies, err = volumehelper.LoadPolicies(callCtx, b, c)
			cancel()
			if err != nil {
				return err
			}
		}
		spec.includeNamespaces = b.Spec.IncludedNamespaces
		spec.excludeNamespaces = b.Spec.ExcludedNamespaces
		spec.resources = &b.Spec
		spec.snapshotVolumes = b.Spec.SnapshotVolumes
		spec.defaultFSBackup = (b.Spec.DefaultVolumesToRestic != nil && *b.Spec.DefaultVolumesToRestic) ||
			(b.Spec.DefaultVolumesToFsBackup != nil && *b.Spec.DefaultVolumesToFsBackup)
	} else {
		spec.includeNamespaces = o.includeNamespaces
		spec.excludeNamespaces = o.excludeNamespaces
		if fl.Changed("snapshot-volumes") {
			spec.snapshotVolumes = &o.snapshotVolumes
		}
		spec.defaultFSBackup = o.defaultFSBackup
	}

	rows, err := explainVolumes(ctx, c, &spec)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.output == formatJSON {
		if rows == nil {
			rows = []volumeExplanation{}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "No volumes found in the namespaces in scope.")
		return nil
	}
	return printExplanations(out, rows)
}

func loadPolicyConfigMap(ctx context.Context, c client.Client, namespace, name string) (*policy.Policies, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{}
	if err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("--policy-configmap: ConfigMap %s/%s not found", namespace, name)
		}
		return nil, fmt.Errorf("--policy-configmap: reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	p, err := policy.FromConfigMap(cm)
	if err != nil {
		return nil, fmt.Errorf("--policy-configmap %s: invalid resource policy:\n%w", name, err)
	}
	return p, nil
}

// explainNamespaces resolves the namespace filters with the backup's own
// rules (selection.NamespaceFilter: empty or "*" is every namespace,
// patterns are globs, excludes win).
func explainNamespaces(ctx context.Context, c client.Client, include, exclude []string) ([]string, error) {
	filter := selection.NewNamespaceFilter(include, exclude)
	if explicit, ok := filter.ExplicitNamespaces(); ok {
		sort.Strings(explicit)
		return explicit, nil
	}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	list := &corev1.NamespaceList{}
	if err := c.List(callCtx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		if filter.ShouldInclude(ns.Name) {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// explainVolumes lists the claims, their PVs and the pods of the namespaces
// in scope (one LIST per kind and namespace, PVs once) and explains each
// volume.
func explainVolumes(ctx context.Context, c client.Client, spec *explainSpec) ([]volumeExplanation, error) {
	namespaces, err := explainNamespaces(ctx, c, spec.includeNamespaces, spec.excludeNamespaces)
	if err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		return nil, nil
	}
	pvs := map[string]*corev1.PersistentVolume{}
	{
		callCtx, cancel := callCtx(ctx)
		list := &corev1.PersistentVolumeList{}
		err := c.List(callCtx, list)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing persistent volumes: %w", err)
		}
		for i := range list.Items {
			pvs[list.Items[i].Name] = &list.Items[i]
		}
	}
	policies := spec.policies
	if policies != nil && len(policies.VolumePolicies) == 0 {
		policies = nil
	}
	var rows []volumeExplanation
	claimed := map[string]bool{}
	for _, ns := range namespaces {
		claims := &corev1.PersistentVolumeClaimList{}
		pods := &corev1.PodList{}
		for _, l := range []struct {
			what string
			list client.ObjectList
		}{{"persistent volume claims", claims}, {"pods", pods}} {
			callCtx, cancel := callCtx(ctx)
			err := c.List(callCtx, l.list, client.InNamespace(ns))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("listing %s in namespace %q: %w", l.what, ns, err)
			}
		}
		slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		byName := map[string]*corev1.PersistentVolumeClaim{}
		for i := range claims.Items {
			byName[claims.Items[i].Name] = &claims.Items[i]
		}
		for i := range claims.Items {
			rows = append(rows, explainClaim(spec, policies, &claims.Items[i], pvs, pods.Items))
			claimed[claims.Items[i].Spec.VolumeName] = true
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			for j := range pod.Spec.Volumes {
				vol := &pod.Spec.Volumes[j]
				if vol.PersistentVolumeClaim != nil {
					continue // explained with its claim
				}
				rows = append(rows, explainPodVolume(spec, policies, pod, vol, byName))
			}
		}
	}
	return append(rows, explainUnclaimedVolumes(ctx, c, spec, policies, pvs, claimed)...), nil
}

// explainUnclaimedVolumes explains the PersistentVolumes a backup holds
// that no claim stands for: when its filters take cluster-scoped
// PersistentVolumes (a whole-cluster backup, or includeClusterResources),
// it stores those that are Available or Released too, and decides them by
// the volume alone, as the backup does. A PV whose claim lives outside the
// namespaces in scope is left out here: its decision also depends on that
// namespace's pods.
func explainUnclaimedVolumes(ctx context.Context, c client.Client, spec *explainSpec, policies *policy.Policies,
	pvs map[string]*corev1.PersistentVolume, claimed map[string]bool,
) []volumeExplanation {
	bs := spec.resources
	if bs == nil {
		bs = &v1.BackupSpec{IncludedNamespaces: spec.includeNamespaces, ExcludedNamespaces: spec.excludeNamespaces}
	}
	filter, errs := selection.NewResourceFilter(bs, nil)
	if len(errs) > 0 || !filter.ShouldIncludeResource(corev1.Resource("persistentvolumes"), false) {
		return nil
	}
	var rows []volumeExplanation
	for _, name := range slices.Sorted(maps.Keys(pvs)) {
		pv := pvs[name]
		if claimed[name] {
			continue // explained with its claim
		}
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Name != "" && ref.Namespace != "" {
			pvc := &corev1.PersistentVolumeClaim{}
			callCtx, cancel := callCtx(ctx)
			err := c.Get(callCtx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pvc)
			cancel()
			if err == nil && pvc.Spec.VolumeName == pv.Name {
				continue // its claim is out of scope (see above)
			}
		}
		e := volumeExplanation{Volume: "pv " + pv.Name}
		if !e.applyPolicy(policies, policy.VolumeFromPV(pv, nil)) {
			switch {
			case spec.snapshotVolumes == nil:
				e.fallback(string(policy.Snapshot), "snapshotVolumes (unset, so true)")
			case *spec.snapshotVolumes:
				e.fallback(string(policy.Snapshot), "snapshotVolumes=true")
			default:
				e.fallback(string(policy.Skip), "snapshotVolumes=false")
			}
		}
		rows = append(rows, e)
	}
	return rows
}

// boundVolume returns the claim's PV, or why it has none, as the volume
// helper decides it.
func boundVolume(pvc *corev1.PersistentVolumeClaim, pvs map[string]*corev1.PersistentVolume) (*corev1.PersistentVolume, string) {
	switch {
	case pvc.Spec.VolumeName == "":
		phase := pvc.Status.Phase
		if phase == "" {
			phase = corev1.ClaimPending
		}
		return nil, fmt.Sprintf("the claim has no volume bound to it (phase %s)", phase)
	case pvc.Status.Phase != corev1.ClaimBound:
		return nil, fmt.Sprintf("the claim is in phase %q, not bound to its volume %s", pvc.Status.Phase, pvc.Spec.VolumeName)
	case pvs[pvc.Spec.VolumeName] == nil:
		return nil, fmt.Sprintf("the claim is bound to PersistentVolume %s, which does not exist", pvc.Spec.VolumeName)
	}
	return pvs[pvc.Spec.VolumeName], ""
}

func explainClaim(spec *explainSpec, policies *policy.Policies, pvc *corev1.PersistentVolumeClaim,
	pvs map[string]*corev1.PersistentVolume, pods []corev1.Pod,
) volumeExplanation {
	e := volumeExplanation{Volume: "pvc " + pvc.Namespace + "/" + pvc.Name}
	pv, unbound := boundVolume(pvc, pvs)
	if e.applyPolicy(policies, policy.VolumeFromPV(pv, pvc)) {
		return e
	}
	if unbound != "" {
		// As the backup decides it (volumehelper.DecideVolume): no data.
		e.fallback(string(policy.Skip), unbound+": no volume data to back up")
		return e
	}
	switch pod := fsBackupPod(spec, policies, pvc, pods); {
	case pod != "":
		e.fallback(string(policy.FSBackup), pod)
	case spec.snapshotVolumes == nil:
		e.fallback(string(policy.Snapshot), "snapshotVolumes (unset, so true)")
	case *spec.snapshotVolumes:
		e.fallback(string(policy.Snapshot), "snapshotVolumes=true")
	default:
		e.fallback(string(policy.Skip), "snapshotVolumes=false")
	}
	return e
}

// fsBackupPod says which pod's fs-backup copies the claim's files when no
// policy matched it, or "".
func fsBackupPod(spec *explainSpec, policies *policy.Policies, pvc *corev1.PersistentVolumeClaim, pods []corev1.Pod) string {
	for i := range pods {
		pod := &pods[i]
		for j := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[j]
			switch {
			case vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == pvc.Name:
			case vol.Ephemeral != nil && pod.Name+"-"+vol.Name == pvc.Name:
				if policies != nil {
					info := policy.VolumeFromPodVolume(corev1.Volume{VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}, pvc, nil)
					if i, action := policies.MatchAction(info); i >= 0 {
						if action.Type == policy.FSBackup {
							return fmt.Sprintf("pod %s/%s:%s is copied by fs-backup (rule %d on its ephemeral volume)", pod.Namespace, pod.Name, vol.Name, i)
						}
						continue
					}
				}
			default:
				continue
			}
			if neverCopied(vol) != "" {
				continue
			}
			if why := annotationSelects(spec, pod, vol.Name); why != "" {
				return fmt.Sprintf("pod %s/%s:%s is copied by fs-backup (%s)", pod.Namespace, pod.Name, vol.Name, why)
			}
		}
	}
	return ""
}

// annotationSelects says why the fs-backup fallback picks the pod's
// volume, or "" when it does not.
func annotationSelects(spec *explainSpec, pod *corev1.Pod, volume string) string {
	return volumehelper.FSBackupSelection(pod.Annotations, volume, spec.defaultFSBackup)
}

// neverCopied names the reason fs-backup never copies a pod volume, or "".
func neverCopied(vol *corev1.Volume) string {
	return volumehelper.NeverFSBackedUpReason(vol, false)
}

func explainPodVolume(spec *explainSpec, policies *policy.Policies, pod *corev1.Pod, vol *corev1.Volume,
	claims map[string]*corev1.PersistentVolumeClaim,
) volumeExplanation {
	e := volumeExplanation{Volume: fmt.Sprintf("pod %s/%s:%s", pod.Namespace, pod.Name, vol.Name)}
	if why := neverCopied(vol); why != "" {
		e.Action = string(policy.Skip)
		e.Reasons = []string{why}
		e.why = why
		return e
	}
	var pvc *corev1.PersistentVolumeClaim
	if vol.Ephemeral != nil {
		pvc = claims[pod.Name+"-"+vol.Name]
	}
	if e.applyPolicy(policies, policy.VolumeFromPodVolume(*vol, pvc, nil)) {
		if e.Action == string(policy.Snapshot) {
			// Only PersistentVolumes are snapshotted.
			e.Action = string(policy.Skip)
			note := "snapshot does not apply to a pod volume"
			e.Reasons = append(e.Reasons, note)
			e.why += "; " + note
		}
		return e
	}
	if why := annotationSelects(spec, pod, vol.Name); why != "" {
		e.fallback(string(policy.FSBackup), why)
	} else if spec.defaultFSBackup {
		e.fallback(string(policy.Skip), "listed in "+volumehelper.VolumesToExcludeAnnotation)
	} else {
		e.fallback(string(policy.Skip), "not listed in "+volumehelper.VolumesToBackupAnnotation+" (defaultVolumesToFsBackup is false)")
	}
	return e
}

// applyPolicy evaluates the policy and records the outcome; it reports
// whether a volume policy decided the volume.
func (e *volumeExplanation) applyPolicy(policies *policy.Policies, info policy.VolumeInfo) bool {
	if policies == nil {
		e.why = "no volume policies"
		e.Reasons = []string{"no volume policies"}
		return false
	}
	m := policies.Match(info)
	rejected := make([]string, len(m.Rejected))
	for i, r := range m.Rejected {
		rejected[i] = fmt.Sprintf("rule %d: %s", r.Index, r.ConditionResult)
		e.Reasons = append(e.Reasons, fmt.Sprintf("rule %d did not match: %s", r.Index, r.ConditionResult))
	}
	if m.Index < 0 {
		e.why = "no rule matched (" + strings.Join(rejected, "; ") + ")"
		return false
	}
	matched := make([]string, len(m.Matched))
	for i, c := range m.Matched {
		matched[i] = c.String()
	}
	conds := strings.Join(matched, ", ")
	if conds == "" {
		conds = "no conditions (matches every volume)"
	}
	e.Rule = &m.Index
	e.Reasons = append(e.Reasons, fmt.Sprintf("rule %d matched: %s", m.Index, conds))
	e.why = fmt.Sprintf("rule %d: %s", m.Index, conds)
	if len(rejected) > 0 {
		e.why += " (not " + strings.Join(rejected, "; not ") + ")"
	}
	e.Action = string(m.Action.Type)
	if m.Action.Type == policy.Custom {
		e.Parameters = m.Action.Parameters
	}
	return true
}

func (e *volumeExplanation) fallback(action, why string) {
	e.Action = action
	e.Reasons = append(e.Reasons, "fallback: "+why)
	e.why += "; fallback: " + why
}

func (e *volumeExplanation) actionText() string {
	if e.Action != string(policy.Custom) || len(e.Parameters) == 0 {
		return e.Action
	}
	keys := make([]string, 0, len(e.Parameters))
	for k := range e.Parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, e.Parameters[k])
	}
	return "custom (" + strings.Join(parts, ",") + ")"
}

func printExplanations(w io.Writer, rows []volumeExplanation) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tACTION\tWHY")
	for i := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", rows[i].Volume, rows[i].actionText(), rows[i].why)
	}
	return tw.Flush()
}
