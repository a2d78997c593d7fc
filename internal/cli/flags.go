package cli

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
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

// byteSize is a size flag written as a Kubernetes quantity: 64Mi, 20Gi,
// 1500000000.
type byteSize struct {
	value *int64
}

func (b byteSize) String() string {
	return resource.NewQuantity(*b.value, resource.BinarySI).String()
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a size such as 64Mi or 20Gi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return fmt.Errorf("%s is not a whole number of bytes that fits in 64 bits", s)
	}
	*b.value = n
	return nil
}

func (b byteSize) Type() string { return "quantity" }

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
