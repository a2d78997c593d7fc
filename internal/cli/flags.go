package cli

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// optionalBool is a bool flag with a third state, unset, so that a spec
// field such as includeClusterResources stays nil ("let the server decide")
// unless the user said true or false. `--flag` alone means true.
type optionalBool struct {
	value *bool
}

func (b *optionalBool) String() string {
	if b.value == nil {
		return ""
	}
	return strconv.FormatBool(*b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.value = &v
	return nil
}

func (b *optionalBool) Type() string { return "bool" }

// parseSelector parses a label selector given to flag, naming the flag in
// the error.
func parseSelector(flag, s string) (*metav1.LabelSelector, error) {
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid --%s %q: %w", flag, s, err)
	}
	return sel, nil
}

// parseOrSelector parses Velero's --or-selector syntax: selectors joined by
// the word "or", e.g. "app=a or tier=db,env=prod".
func parseOrSelector(flag, s string) ([]*metav1.LabelSelector, error) {
	var out []*metav1.LabelSelector
	for part := range strings.SplitSeq(s, " or ") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("invalid --%s %q: empty selector around \"or\"", flag, s)
		}
		sel, err := parseSelector(flag, part)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}
