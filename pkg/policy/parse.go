package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FromConfigMap parses the policy held by a resource-policy ConfigMap. Like
// Velero, it requires exactly one data key, whatever its name; problems are
// returned as a *ValidationError whose Source names the ConfigMap.
func FromConfigMap(cm *corev1.ConfigMap) (*Policies, error) {
	if cm == nil {
		return nil, errors.New("no resource policy ConfigMap given")
	}
	source := "ConfigMap " + cm.Namespace + "/" + cm.Name
	if cm.Namespace == "" {
		source = "ConfigMap " + cm.Name
	}
	if len(cm.Data) != 1 {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		msg := "has no keys"
		if len(keys) > 0 {
			msg = fmt.Sprintf("has %d keys (%s)", len(keys), strings.Join(keys, ", "))
		}
		if len(cm.BinaryData) > 0 {
			msg += " (binaryData is not read)"
		}
		return nil, &ValidationError{Source: source, Problems: []*FieldError{{
			Field:   "data",
			Message: msg + "; a resource policy ConfigMap holds exactly one data key whose value is the policy YAML",
		}}}
	}
	var data string
	for _, v := range cm.Data {
		data = v
	}
	p, err := Parse([]byte(data))
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Source = source
	}
	return p, err
}

// Parse parses and validates a policy document. On any problem it returns
// a *ValidationError listing all of them.
func Parse(data []byte) (*Policies, error) {
	p := &parser{}
	var out *Policies
	if len(data) > MaxBytes {
		p.fail(nil, "", "the policy is %d bytes; a resource policy holds at most %d MiB, the most a ConfigMap can", len(data), MaxBytes>>20)
	} else {
		out = p.document(data)
	}
	if len(p.problems) > 0 {
		// Keys are checked before their values, so sort to read top down.
		slices.SortStableFunc(p.problems, func(a, b problem) int { return a.order - b.order })
		errs := make([]*FieldError, len(p.problems))
		for i, pr := range p.problems {
			errs[i] = pr.FieldError
		}
		return nil, &ValidationError{Problems: errs}
	}
	slices.SortStableFunc(p.warnings, func(a, b problem) int { return a.order - b.order })
	for _, w := range p.warnings {
		out.Warnings = append(out.Warnings, w.FieldError)
	}
	return out, nil
}

var (
	topKeys          = []string{"version", "volumePolicies", "includeExcludePolicy", "namespacedFilterPolicies", "clusterScopedFilterPolicy"}
	volumePolicyKeys = []string{"conditions", "action"}
	conditionKeys    = []string{"capacity", "storageClass", "nfs", "csi", "volumeTypes", "pvcLabels", "pvcPhase", "pvcVolumeMode", "pvcAccessModes"}
	nfsKeys          = []string{"server", "path"}
	csiKeys          = []string{"driver", "volumeAttributes"}
	actionKeys       = []string{"type", "parameters"}
	includeExclKeys  = []string{
		"includedClusterScopedResources", "excludedClusterScopedResources",
		"includedNamespaceScopedResources", "excludedNamespaceScopedResources",
	}
)

type parser struct {
	problems []problem
	warnings []problem
}

type problem struct {
	*FieldError
	// order is twice the line, plus one for a missing key: that reads best
	// after everything its mapping holds.
	order int
}

func (p *parser) fail(n *yaml.Node, field, format string, args ...any) {
	e := &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	p.problems = append(p.problems, problem{FieldError: e, order: 2 * e.Line})
}

// warn records something Velero accepts that is likely a mistake: the
// policy stays valid, and the warning says what to write instead.
func (p *parser) warn(n *yaml.Node, field, format string, args ...any) {
	e := &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	p.warnings = append(p.warnings, problem{FieldError: e, order: 2 * e.Line})
}

// missing reports a required key absent from mapping n.
func (p *parser) missing(n *yaml.Node, field, format string, args ...any) {
	p.fail(n, field, format, args...)
	p.problems[len(p.problems)-1].order = 2*lastLine(n) + 1
}

func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

func (p *parser) document(data []byte) *Policies {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.fail(nil, "", `the policy is empty; it starts with "version: v1"`)
		} else {
			p.fail(nil, "", "not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.fail(&extra, "", "the policy must be a single YAML document; remove everything after the first \"---\"")
	}
	// Everything below follows aliases; this bounds what that costs.
	if !p.checkSize(&doc) {
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.fail(nil, "", `the policy is empty; it starts with "version: v1"`)
			return nil
		}
		root = root.Content[0]
	}
	entries := p.mapping(root, "", topKeys)
	if entries == nil {
		return nil
	}
	out := &Policies{}
	if n := entries.get("version"); n == nil {
		p.missing(root, "version", "missing; use %s", SupportedVersion)
	} else if s, ok := p.str(n, "version"); ok {
		if s != SupportedVersion {
			p.fail(n, "version", "%q is not supported; use %s", s, SupportedVersion)
		}
		out.Version = s
	}
	if n := entries.get("volumePolicies"); n != nil && !isNull(n) {
		if n.Kind != yaml.SequenceNode {
			p.fail(n, "volumePolicies", "must be a list of {conditions, action}")
		} else {
			for i, item := range n.Content {
				vp := p.volumePolicy(deref(item), fmt.Sprintf("volumePolicies[%d]", i))
				out.VolumePolicies = append(out.VolumePolicies, vp)
			}
		}
	}
	if n := entries.get("includeExcludePolicy"); n != nil && !isNull(n) {
		out.IncludeExcludePolicy = p.includeExclude(n, "includeExcludePolicy")
	}
	if n := entries.get("namespacedFilterPolicies"); n != nil && !isNull(n) {
		out.NamespacedFilterPolicies = p.namespacedFilterPolicies(n, "namespacedFilterPolicies")
	}
	if n := entries.get("clusterScopedFilterPolicy"); n != nil && !isNull(n) {
		out.ClusterScopedFilterPolicy = p.clusterScopedFilterPolicy(n, "clusterScopedFilterPolicy")
	}
	return out
}

func (p *parser) volumePolicy(n *yaml.Node, field string) VolumePolicy {
	var vp VolumePolicy
	entries := p.mapping(n, field, volumePolicyKeys)
	if entries == nil {
		return vp
	}
	// A rule without conditions is Velero's way to write a catch-all, so a
	// missing or empty conditions key is allowed.
	if c := entries.get("conditions"); c != nil && !isNull(c) {
		vp.Conditions = p.conditions(c, field+".conditions")
	}
	if a := entries.get("action"); a == nil || isNull(a) {
		p.missing(n, field+".action", "missing; every volume policy needs an action with a type: %s", actionList())
	} else {
		vp.Action = p.action(a, field+".action")
	}
	return vp
}

func (p *parser) conditions(n *yaml.Node, field string) Conditions {
	var c Conditions
	entries := p.mapping(n, field, conditionKeys)
	for _, e := range entries {
		f := field + "." + e.key
		v := e.value
		switch e.key {
		case "capacity":
			c.Capacity = p.capacity(v, f)
		case "storageClass":
			c.StorageClass = p.strings(v, f)
		case "nfs":
			if isNull(v) {
				p.warn(v, f, "has no value, so it does not constrain the volume (Velero reads it so too); write nfs: {} to match only NFS volumes, or remove the key")
				continue
			}
			m := p.mapping(v, f, nfsKeys)
			if m == nil {
				continue
			}
			c.NFS = &NFSCondition{}
			if s := m.get("server"); s != nil {
				c.NFS.Server, _ = p.str(s, f+".server")
			}
			if s := m.get("path"); s != nil {
				c.NFS.Path, _ = p.str(s, f+".path")
			}
		case "csi":
			if isNull(v) {
				p.warn(v, f, "has no value, so it does not constrain the volume (Velero reads it so too); write csi: {} to match only CSI volumes, or remove the key")
				continue
			}
			m := p.mapping(v, f, csiKeys)
			if m == nil {
				continue
			}
			c.CSI = &CSICondition{}
			if s := m.get("driver"); s != nil {
				c.CSI.Driver, _ = p.str(s, f+".driver")
			}
			if a := m.get("volumeAttributes"); a != nil {
				c.CSI.VolumeAttributes = p.stringMap(a, f+".volumeAttributes")
				// Attribute names are defined by each driver; without one
				// the pairs would match unrelated drivers by accident.
				// Velero refuses this too, even for an empty mapping.
				if c.CSI.Driver == "" && !isNull(a) {
					p.fail(a, f+".volumeAttributes", "needs csi.driver; volume attributes are only meaningful for one driver")
				}
			}
		case "volumeTypes":
			// Velero accepts any name here and compares names as written,
			// so a misspelt type is valid and never matches.
			for i, s := range p.stringsWithNodes(v, f) {
				c.VolumeTypes = append(c.VolumeTypes, VolumeType(s.value))
				if !slices.Contains(VolumeTypes, VolumeType(s.value)) {
					p.warn(s.node, fmt.Sprintf("%s[%d]", f, i), "%q is not a volume type, so it never matches (names are case-sensitive)%s",
						s.value, suggest(s.value, VolumeTypes, "use one of"))
				}
			}
		case "pvcLabels":
			if isNull(v) {
				p.fail(v, f, "has no value; give a mapping of label names to values, or remove the key")
				continue
			}
			c.PVCLabels = p.stringMap(v, f)
		case "pvcPhase":
			for i, s := range p.stringsWithNodes(v, f) {
				phase := corev1.PersistentVolumeClaimPhase(s.value)
				c.PVCPhase = append(c.PVCPhase, phase)
				if !slices.Contains(PVCPhases, phase) {
					p.warn(s.node, fmt.Sprintf("%s[%d]", f, i), "%q is not a PVC phase, so it never matches (phases are case-sensitive)%s",
						s.value, suggest(s.value, PVCPhases, "use"))
				}
			}
		case "pvcVolumeMode":
			// Velero takes only a YAML string here (not a number, a list or
			// null), and any string: Kubernetes may add modes.
			if vv := deref(v); vv.Kind != yaml.ScalarNode || vv.ShortTag() != "!!str" {
				p.fail(v, f, "must be a string: Filesystem or Block")
				continue
			}
			c.PVCVolumeMode = deref(v).Value
			if c.PVCVolumeMode != "" && !slices.Contains(PVCVolumeModes, corev1.PersistentVolumeMode(c.PVCVolumeMode)) {
				p.warn(v, f, "%q is not a volume mode, so it never matches (modes are case-sensitive)%s",
					c.PVCVolumeMode, suggest(c.PVCVolumeMode, PVCVolumeModes, "use"))
			}
		case "pvcAccessModes":
			vv := deref(v)
			if vv.Kind != yaml.SequenceNode {
				p.fail(v, f, "must be a list of access modes, e.g. [ReadWriteOnce]")
				continue
			}
			for i, item := range vv.Content {
				item = deref(item)
				fi := fmt.Sprintf("%s[%d]", f, i)
				if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
					p.fail(item, fi, "must be a string, an access mode such as ReadWriteOnce")
					continue
				}
				c.PVCAccessModes = append(c.PVCAccessModes, item.Value)
				if !slices.Contains(PVCAccessModes, corev1.PersistentVolumeAccessMode(item.Value)) {
					p.warn(item, fi, "%q is not an access mode, so the condition never matches (modes are case-sensitive)%s",
						item.Value, suggest(item.Value, PVCAccessModes, "use"))
				}
			}
		}
	}
	return c
}

// capacity parses Velero's "lower,upper" form. A zero or empty bound is
// open, and the range must have its upper bound at or above its lower one
// unless the upper one is open: Velero's rules, negative bounds included
// (accepted, with a warning, since no volume has a negative size). An empty
// or null capacity constrains nothing, as in Velero.
func (p *parser) capacity(n *yaml.Node, field string) *CapacityRange {
	if isNull(n) {
		return nil
	}
	raw, ok := p.str(n, field)
	if !ok || raw == "" {
		return nil
	}
	lo, hi, found := strings.Cut(raw, ",")
	if !found || strings.Contains(hi, ",") {
		p.fail(n, field, `%q: write "lower,upper" with Kubernetes quantities, either side may be empty (e.g. "10Gi,100Gi", ",5Gi", "1Ti,")`, raw)
		return nil
	}
	r := &CapacityRange{Raw: raw}
	bad := false
	var zero resource.Quantity
	bound := func(s, which string) resource.Quantity {
		s = strings.TrimSpace(s)
		if s == "" {
			return zero
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			p.fail(n, field, "%q: the %s bound %q is not a Kubernetes quantity (e.g. 500Mi, 10Gi, 1Ti)", raw, which, s)
			bad = true
			return zero
		}
		if q.Sign() < 0 {
			p.warn(n, field, "%q: the %s bound %q is negative, and no volume is; write a bound of 0 or more", raw, which, s)
		}
		return q
	}
	lower := bound(lo, "lower")
	upper := bound(hi, "upper")
	if bad {
		return nil
	}
	if upper.Cmp(lower) < 0 && (lower.IsZero() || !upper.IsZero()) {
		p.fail(n, field, "%q: the lower bound is above the upper one", raw)
		return nil
	}
	if !lower.IsZero() {
		r.Min = &lower
	}
	if !upper.IsZero() {
		r.Max = &upper
	}
	return r
}

func (p *parser) action(n *yaml.Node, field string) Action {
	var a Action
	entries := p.mapping(n, field, actionKeys)
	if entries == nil {
		return a
	}
	if t := entries.get("type"); t == nil || isNull(t) {
		p.missing(n, field+".type", "missing; use %s", actionList())
	} else if s, ok := p.str(t, field+".type"); ok {
		if slices.Contains(ActionTypes, ActionType(s)) {
			a.Type = ActionType(s)
		} else {
			p.fail(t, field+".type", "%q is not an action; use %s", s, actionList())
		}
	}
	if params := entries.get("parameters"); params != nil && !isNull(params) {
		if params.Kind != yaml.MappingNode {
			p.fail(params, field+".parameters", "must be a mapping of names to values")
		} else if v, ok := p.value(params, field+".parameters").(map[string]any); ok {
			a.Parameters = v
		}
	}
	return a
}

func (p *parser) includeExclude(n *yaml.Node, field string) *IncludeExcludePolicy {
	entries := p.mapping(n, field, includeExclKeys)
	if entries == nil {
		return nil
	}
	out := &IncludeExcludePolicy{}
	lists := map[string]*[]string{
		"includedClusterScopedResources":   &out.IncludedClusterScopedResources,
		"excludedClusterScopedResources":   &out.ExcludedClusterScopedResources,
		"includedNamespaceScopedResources": &out.IncludedNamespaceScopedResources,
		"excludedNamespaceScopedResources": &out.ExcludedNamespaceScopedResources,
	}
	nodes := map[string][]stringNode{}
	for _, e := range entries {
		f := field + "." + e.key
		items := p.stringsWithNodes(e.value, f)
		nodes[e.key] = items
		for i, s := range items {
			// Velero refuses "*" here: the policy is reused across backups
			// and a wildcard would silently override each backup's own
			// filters.
			if s.value == "*" {
				p.fail(s.node, fmt.Sprintf("%s[%d]", f, i), `"*" is not allowed in includeExcludePolicy; list the resources by name`)
				continue
			}
			*lists[e.key] = append(*lists[e.key], s.value)
		}
	}
	for _, scope := range []string{"ClusterScopedResources", "NamespaceScopedResources"} {
		inc, exc := "included"+scope, "excluded"+scope
		for i, s := range nodes[exc] {
			if s.value != "*" && slices.ContainsFunc(nodes[inc], func(o stringNode) bool { return o.value == s.value }) {
				p.fail(s.node, fmt.Sprintf("%s.%s[%d]", field, exc, i),
					"%q is also in %s.%s; a resource is either included or excluded", s.value, field, inc)
			}
		}
	}
	return out
}

// entry is one key of a YAML mapping, in document order.
type entry struct {
	key   string
	value *yaml.Node
}

type entries []entry

func (es entries) get(key string) *yaml.Node {
	for _, e := range es {
		if e.key == key {
			return e.value
		}
	}
	return nil
}

// mapping checks that n is a mapping whose keys are all in allowed and
// appear once, reporting every offender, and returns the allowed entries.
// It returns nil when n is not a mapping at all.
func (p *parser) mapping(n *yaml.Node, field string, allowed []string) entries {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		what := "must be"
		if field == "" {
			what = "the policy must be"
		}
		p.fail(n, field, "%s a mapping with the keys %s", what, strings.Join(allowed, ", "))
		return nil
	}
	out := entries{}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		key := k.Value
		f := join(field, key)
		if k.Kind != yaml.ScalarNode {
			p.fail(k, field, "has a key that is not a name; allowed keys are %s", strings.Join(allowed, ", "))
			continue
		}
		if line, dup := seen[key]; dup {
			p.fail(k, f, "appears twice (lines %d and %d); keep one", line, k.Line)
			continue
		}
		seen[key] = k.Line
		if !slices.Contains(allowed, key) {
			p.fail(k, f, "unknown key%s", suggest(key, allowed, "allowed keys are"))
			continue
		}
		out = append(out, entry{key: key, value: v})
	}
	return out
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// str returns a scalar as text. Numbers and booleans are accepted as their
// literal text, as Velero's decoder does for string fields, so a storage
// class named 123 needs no quotes.
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, field, "must be a string")
		return "", false
	}
	return n.Value, true
}

type stringNode struct {
	value string
	node  *yaml.Node
}

func (p *parser) stringsWithNodes(n *yaml.Node, field string) []stringNode {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "must be a list of strings")
		return nil
	}
	out := make([]stringNode, 0, len(n.Content))
	for i, item := range n.Content {
		if s, ok := p.str(item, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, stringNode{value: s, node: deref(item)})
		}
	}
	return out
}

func (p *parser) strings(n *yaml.Node, field string) []string {
	items := p.stringsWithNodes(n, field)
	if len(items) == 0 {
		return nil
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = s.value
	}
	return out
}

func (p *parser) stringMap(n *yaml.Node, field string) map[string]string {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, "must be a mapping of names to strings")
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.fail(k, field, "has a key that is not a name")
			continue
		}
		f := field + "." + k.Value
		if _, dup := out[k.Value]; dup {
			p.fail(k, f, "appears twice; keep one")
			continue
		}
		if v.Kind != yaml.ScalarNode {
			p.fail(v, f, "must be a string")
			continue
		}
		// A label value may be empty, and "key:" with nothing after it is
		// how YAML writes that.
		if isNull(v) {
			out[k.Value] = ""
			continue
		}
		out[k.Value] = v.Value
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// value converts a parameters subtree to plain Go values. Map keys are
// always strings and timestamps stay text, so parameters survive a JSON
// round trip (volume info files, plugin calls) unchanged.
func (p *parser) value(n *yaml.Node, field string) any {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				p.fail(k, field, "has a key that is not a name")
				continue
			}
			f := field + "." + k.Value
			if _, dup := m[k.Value]; dup {
				p.fail(k, f, "appears twice; keep one")
				continue
			}
			m[k.Value] = p.value(n.Content[i+1], f)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, item := range n.Content {
			l[i] = p.value(item, fmt.Sprintf("%s[%d]", field, i))
		}
		return l
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				p.fail(n, field, "%v", err)
				return nil
			}
			return v
		}
		return n.Value
	}
	p.fail(n, field, "unsupported YAML value")
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func actionList() string {
	return "snapshot, fs-backup, skip or custom"
}

// suggest ends a message with the accepted values, pointing at the one the
// user most likely meant when only the case differs.
func suggest[T ~string](got string, allowed []T, lead string) string {
	for _, a := range allowed {
		if strings.EqualFold(got, string(a)) {
			return fmt.Sprintf("; did you mean %q?", string(a))
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "; " + lead + " " + strings.Join(names, ", ")
}
