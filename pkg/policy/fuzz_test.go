package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzParse feeds the parser arbitrary documents, as anyone who may edit a
// policy ConfigMap could. It must not panic or run away; a document is
// either a policy that matches volumes and survives the JSON its
// parameters travel in, or a list of problems, each saying what is wrong
// at a line of the document.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"version: v1\n",
		`version: v1
volumePolicies:
- conditions:
    capacity: "10Gi,100Gi"
    storageClass: [gold, silver]
    nfs: {server: nas, path: /export}
    csi: {driver: ebs.csi.aws.com, volumeAttributes: {type: gp3}}
    volumeTypes: [csi, nfs, emptyDir]
    pvcLabels: {app: db}
    pvcPhase: [Bound]
  action: {type: custom, parameters: {tier: 1, deep: {list: [a, 2, true, null]}}}
- action: {type: skip}
includeExcludePolicy:
  includedClusterScopedResources: [storageclasses]
  excludedNamespaceScopedResources: [events]
`,
		"version: v1\nvolumePolicies:\n- conditions: {storageClass: &c [gold]}\n  action: &a {type: snapshot}\n- conditions: {storageClass: *c}\n  action: *a\n",
		"version: v1\nvolumePolicies:\n- action:\n    type: custom\n    parameters: &p {x: *p}\n",
		laughs(6),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata:\n  policy.yaml: |\n    version: v1\n",
		"version: v2\n---\nversion: v1\n",
		"[",
		"",
	} {
		f.Add(seed)
	}
	// Every YAML line break counts, and yaml.v3 puts the empty value after
	// a final "---" on the line after the last.
	breaks := strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")
	lines := func(doc string) int { return strings.Count(breaks.Replace(doc), "\n") + 2 }
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := Parse([]byte(doc))
		checkParsed(t, doc, lines(doc), p, err)
		p, err = ParseFile([]byte(doc))
		var ve *ValidationError
		if err != nil && !errors.As(err, &ve) && !strings.HasPrefix(err.Error(), "not a valid ConfigMap manifest") {
			t.Fatalf("ParseFile: error %q says neither what nor where", err)
		}
		if err == nil {
			// A policy read out of a manifest has its own line numbers.
			checkParsed(t, doc, -1, p, nil)
		}
	})
}

func checkParsed(t *testing.T, doc string, maxLine int, p *Policies, err error) {
	t.Helper()
	if err != nil {
		var ve *ValidationError
		if p != nil || !errors.As(err, &ve) || len(ve.Problems) == 0 {
			t.Fatalf("got %v and %T %v; want no policy and a list of problems", p, err, err)
		}
		for _, pr := range ve.Problems {
			if pr.Message == "" || pr.Line < 0 || (maxLine >= 0 && pr.Line > maxLine) {
				t.Fatalf("problem %+v: no message, or a line past %d", pr, maxLine)
			}
		}
		return
	}
	if p == nil || p.Version != SupportedVersion {
		t.Fatalf("a valid document gave %+v", p)
	}
	for _, vp := range p.VolumePolicies {
		if !strings.Contains(actionList(), string(vp.Action.Type)) || vp.Action.Type == "" {
			t.Fatalf("accepted action %q", vp.Action.Type)
		}
		out, err := json.Marshal(vp.Action.Parameters)
		if err != nil {
			t.Fatalf("parameters %v do not survive JSON: %v", vp.Action.Parameters, err)
		}
		// Aliases may repeat text, but only up to the bound.
		if len(out) > 2*MaxTextBytes+16*MaxValues {
			t.Fatalf("parameters of a %d-byte policy are %d bytes of JSON", len(doc), len(out))
		}
	}
	q := resource.MustParse("10Gi")
	for _, v := range []VolumeInfo{
		{},
		{Type: VolumeCSI, CSIDriver: "ebs.csi.aws.com", CSIVolumeAttributes: map[string]string{"type": "gp3"}, Capacity: &q,
			StorageClass: "gold", PVCLabels: map[string]string{"app": "db"}, PVCPhase: corev1.ClaimBound},
		{Type: VolumeNFS, NFSServer: "nas", NFSPath: "/export"},
	} {
		i, a := p.MatchAction(v)
		m := p.Match(v)
		if i != m.Index || (i >= 0 && a.Type != p.VolumePolicies[i].Action.Type) {
			t.Fatalf("MatchAction says %d %v, Match says %d", i, a, m.Index)
		}
	}
}
