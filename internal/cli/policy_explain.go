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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	policies *policy.Policies
	// backup is the spec of the backup to explain: an existing backup's
	// (--backup), or one holding only what the flags say, so that its
	// resource filters are the namespace flags alone, as a backup with only
	// those would have.
	backup v1.BackupSpec
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
			"condition that failed, and the fallback used when none matched. The decisions are\n" +
			"those of the VolumeHelper a backup uses, with the same inputs.\n\n" +
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
		spec.backup = b.Spec
	} else {
		spec.backup = v1.BackupSpec{
			IncludedNamespaces:       o.includeNamespaces,
			ExcludedNamespaces:       o.excludeNamespaces,
			DefaultVolumesToFsBackup: &o.defaultFSBackup,
		}
		if fl.Changed("snapshot-volumes") {
			spec.backup.SnapshotVolumes = &o.snapshotVolumes
		}
	}

	// Warnings go to standard error, so that -o json stays one document.
	stderr := cmd.ErrOrStderr()
	if o.backup != "" && !policyGiven {
		if w := volumehelper.PolicyKindWarning(&v1.Backup{Spec: spec.backup}); w != "" {
			fmt.Fprintln(stderr, "Warning: "+w)
		}
	}
	for _, w := range spec.policies.WarningMessages() {
		fmt.Fprintln(stderr, "Warning: "+w)
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
// in scope (one LIST per kind and namespace, PVs once) and has the backup's
// own VolumeHelper decide each volume, reading from those lists.
func explainVolumes(ctx context.Context, c client.Client, spec *explainSpec) ([]volumeExplanation, error) {
	namespaces, err := explainNamespaces(ctx, c, spec.backup.IncludedNamespaces, spec.backup.ExcludedNamespaces)
	if err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		return nil, nil
	}
	listed := &listedObjects{
		Client: c,
		pvs:    map[string]*corev1.PersistentVolume{},
		claims: map[string]map[string]*corev1.PersistentVolumeClaim{},
		pods:   map[string][]corev1.Pod{},
	}
	{
		callCtx, cancel := callCtx(ctx)
		list := &corev1.PersistentVolumeList{}
		err := c.List(callCtx, list)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing persistent volumes: %w", err)
		}
		for i := range list.Items {
			listed.pvs[list.Items[i].Name] = &list.Items[i]
		}
	}
	claimsOf := map[string][]corev1.PersistentVolumeClaim{}
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
		claimsOf[ns], listed.claims[ns], listed.pods[ns] = claims.Items, byName, pods.Items
	}

	// The namespaces are resolved already: the helper indexes the pods of
	// exactly those, from the lists, and decides as the backup would.
	helperSpec := spec.backup
	helperSpec.IncludedNamespaces, helperSpec.ExcludedNamespaces = namespaces, nil
	helper, err := volumehelper.NewVolumeHelperForSpec(&helperSpec, spec.policies, listed, nil)
	if err != nil {
		return nil, err
	}
	var rows []volumeExplanation
	claimed := map[string]bool{}
	for _, ns := range namespaces {
		for i := range claimsOf[ns] {
			pvc := &claimsOf[ns][i]
			row, err := explainObject(helper, "pvc "+pvc.Namespace+"/"+pvc.Name, pvc, volumehelper.PersistentVolumeClaims)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
			claimed[pvc.Spec.VolumeName] = true
		}
		pods := listed.pods[ns]
		for i := range pods {
			pod := &pods[i]
			for j := range pod.Spec.Volumes {
				vol := &pod.Spec.Volumes[j]
				if vol.PersistentVolumeClaim != nil {
					continue // explained with its claim
				}
				name := fmt.Sprintf("pod %s/%s:%s", pod.Namespace, pod.Name, vol.Name)
				d, err := helper.ExplainPodVolume(*vol, *pod)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				rows = append(rows, explanation(name, d))
			}
		}
	}
	unclaimed, err := explainUnclaimedVolumes(ctx, listed, spec, helper, claimed)
	if err != nil {
		return nil, err
	}
	return append(rows, unclaimed...), nil
}

// explainObject has the helper decide a claim or PV.
func explainObject(helper volumehelper.VolumeHelper, name string, obj runtime.Object, gr schema.GroupResource) (volumeExplanation, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return volumeExplanation{}, fmt.Errorf("%s: %w", name, err)
	}
	d, err := helper.ExplainVolume(&unstructured.Unstructured{Object: content}, gr)
	if err != nil {
		return volumeExplanation{}, fmt.Errorf("%s: %w", name, err)
	}
	return explanation(name, d), nil
}

// explainUnclaimedVolumes explains the PersistentVolumes a backup holds
// that no claim stands for: when its filters take cluster-scoped
// PersistentVolumes (a whole-cluster backup, or includeClusterResources),
// it stores those that are Available or Released too, and decides them by
// the volume alone, as the backup does. A PV whose claim lives outside the
// namespaces in scope is left out here: its decision also depends on that
// namespace's pods.
func explainUnclaimedVolumes(ctx context.Context, listed *listedObjects, spec *explainSpec, helper volumehelper.VolumeHelper,
	claimed map[string]bool,
) ([]volumeExplanation, error) {
	filter, errs := selection.NewResourceFilter(&spec.backup, nil)
	if spec.policies != nil && spec.policies.IncludeExcludePolicy != nil {
		filter.CombineWithPolicy(selection.PolicyFilters(*spec.policies.IncludeExcludePolicy), nil)
	}
	if len(errs) > 0 || !filter.ShouldIncludeResource(corev1.Resource("persistentvolumes"), false) {
		return nil, nil
	}
	var rows []volumeExplanation
	for _, name := range slices.Sorted(maps.Keys(listed.pvs)) {
		pv := listed.pvs[name]
		if claimed[name] {
			continue // explained with its claim
		}
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Name != "" && ref.Namespace != "" {
			pvc := &corev1.PersistentVolumeClaim{}
			callCtx, cancel := callCtx(ctx)
			err := listed.Get(callCtx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pvc)
			cancel()
			if err == nil && pvc.Spec.VolumeName == pv.Name {
				continue // its claim is out of scope (see above)
			}
		}
		row, err := explainObject(helper, "pv "+pv.Name, pv, volumehelper.PersistentVolumes)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// listedObjects answers the VolumeHelper's lookups from what explain listed
// (every PV, the claims and pods of the namespaces in scope), so that
// explaining a namespace costs one LIST per kind, not a GET per volume;
// anything else (a claim in another namespace) is read from the cluster.
type listedObjects struct {
	client.Client
	pvs map[string]*corev1.PersistentVolume
	// claims and pods are by namespace; a namespace is present when listed.
	claims map[string]map[string]*corev1.PersistentVolumeClaim
	pods   map[string][]corev1.Pod
}

func (l *listedObjects) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch out := obj.(type) {
	case *corev1.PersistentVolume:
		pv, ok := l.pvs[key.Name]
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("persistentvolumes"), key.Name)
		}
		pv.DeepCopyInto(out)
		return nil
	case *corev1.PersistentVolumeClaim:
		if claims, ok := l.claims[key.Namespace]; ok {
			pvc, ok := claims[key.Name]
			if !ok {
				return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), key.Name)
			}
			pvc.DeepCopyInto(out)
			return nil
		}
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

func (l *listedObjects) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if out, ok := list.(*corev1.PodList); ok {
		lo := &client.ListOptions{}
		lo.ApplyOptions(opts)
		if pods, ok := l.pods[lo.Namespace]; ok && lo.LabelSelector == nil && lo.FieldSelector == nil {
			out.Items = make([]corev1.Pod, len(pods))
			for i := range pods {
				pods[i].DeepCopyInto(&out.Items[i])
			}
			out.Continue = ""
			return nil
		}
	}
	return l.Client.List(ctx, list, opts...)
}

// explanation turns the helper's decision into a row: the verdict of each
// volume policy tried, then what decided.
func explanation(volume string, d volumehelper.Decision) volumeExplanation {
	e := volumeExplanation{Volume: volume, Action: string(d.Action)}
	if d.Source == volumehelper.SourceNeverFSBackup {
		// Decided before any policy is consulted.
		e.Reasons, e.why = []string{d.Reason}, d.Reason
		return e
	}
	e.policyVerdicts(d.Match)
	if d.Source == volumehelper.SourceRule {
		rule := d.Rule
		e.Rule = &rule
		if d.Action == policy.Custom {
			e.Parameters = d.Parameters
		}
		if d.Reason != "" {
			// Why the rule's action does not apply as written.
			e.Reasons = append(e.Reasons, d.Reason)
			e.why += "; " + d.Reason
		}
		return e
	}
	why := d.Reason
	if p := d.Pod; d.Source == volumehelper.SourcePodVolume && p != nil {
		chosen := p.Reason
		if p.Source == volumehelper.SourceRule {
			chosen = fmt.Sprintf("rule %d on its ephemeral volume", p.Rule)
		}
		why = fmt.Sprintf("pod %s/%s:%s is copied by fs-backup (%s)", p.Namespace, p.Pod, p.Volume, chosen)
	}
	e.fallback(why)
	return e
}

// policyVerdicts records each volume policy's verdict: the first failing
// condition of every policy that did not match, and the conditions of the
// one that did.
func (e *volumeExplanation) policyVerdicts(m *policy.Match) {
	if m == nil {
		e.why = "no volume policies"
		e.Reasons = []string{"no volume policies"}
		return
	}
	rejected := make([]string, len(m.Rejected))
	for i, r := range m.Rejected {
		rejected[i] = fmt.Sprintf("rule %d: %s", r.Index, r.ConditionResult)
		e.Reasons = append(e.Reasons, fmt.Sprintf("rule %d did not match: %s", r.Index, r.ConditionResult))
	}
	if m.Index < 0 {
		e.why = "no rule matched (" + strings.Join(rejected, "; ") + ")"
		return
	}
	matched := make([]string, len(m.Matched))
	for i, c := range m.Matched {
		matched[i] = c.String()
	}
	conds := strings.Join(matched, ", ")
	if conds == "" {
		conds = "no conditions (matches every volume)"
	}
	e.Reasons = append(e.Reasons, fmt.Sprintf("rule %d matched: %s", m.Index, conds))
	e.why = fmt.Sprintf("rule %d: %s", m.Index, conds)
	if len(rejected) > 0 {
		e.why += " (not " + strings.Join(rejected, "; not ") + ")"
	}
}

func (e *volumeExplanation) fallback(why string) {
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
