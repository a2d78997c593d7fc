package policy

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on a policy. They are far above any policy written by hand, and
// they hold what the parser builds from a document to a few MiB whatever
// the document does.
const (
	// MaxBytes bounds a policy document: a ConfigMap holds at most 1 MiB.
	MaxBytes = 1 << 20
	// MaxFileBytes bounds a file given to ParseFile: a ConfigMap manifest
	// adds metadata and indentation around the policy.
	MaxFileBytes = 4 * MaxBytes
	// MaxValues bounds the values (mappings, lists, scalars) in a policy,
	// counting each use of a YAML alias as the values it stands for: a few
	// hundred bytes of nested aliases can stand for billions.
	MaxValues = 100_000
	// MaxTextBytes bounds the text of the scalars, counted the same way.
	MaxTextBytes = 4 * MaxBytes
)

// checkSize refuses a document past the bounds above, walking it once as
// the parser will see it, aliases expanded, and stopping at the first value
// past them; so refusing costs no more than a policy at the limit. It
// reports whether the document may be parsed.
func (p *parser) checkSize(doc *yaml.Node) bool {
	w := sizeWalk{}
	if w.walk(doc) {
		return true
	}
	field := fieldPath(w.literal)
	if w.cycle != nil {
		p.fail(w.cycle, field, "the YAML alias *%s is inside the value it names, which would repeat forever; write the value out", w.cycle.Value)
		return false
	}
	what := fmt.Sprintf("more than %d values", MaxValues)
	if w.text > MaxTextBytes {
		what = fmt.Sprintf("more than %d MiB of text", MaxTextBytes>>20)
	}
	if w.via == nil {
		p.fail(w.at, field, "the policy holds %s; split it or write it shorter", what)
		return false
	}
	p.fail(w.via, field, "the YAML alias *%s makes the policy hold %s, counting each alias as the values it repeats; "+
		"write the values out, or repeat them less", w.via.Value, what)
	return false
}

type sizeWalk struct {
	values, text int
	// literal holds the nodes from the document down to the one being
	// walked, as written: aliases are not followed into it.
	literal []*yaml.Node
	// via is the outermost alias being followed, at is the last node
	// walked; both are left where the walk stopped.
	via, at *yaml.Node
	// open holds the anchored nodes being walked, and cycle the alias
	// found to name one of them: yaml.v3 accepts an alias inside its own
	// anchor and builds a loop.
	open  map[*yaml.Node]bool
	cycle *yaml.Node
}

func (w *sizeWalk) walk(n *yaml.Node) bool {
	w.at = n
	w.values++
	w.text += len(n.Value)
	if w.via == nil {
		w.literal = append(w.literal, n)
	}
	if w.values > MaxValues || w.text > MaxTextBytes {
		return false
	}
	if n.Anchor != "" {
		if w.open == nil {
			w.open = map[*yaml.Node]bool{}
		}
		w.open[n] = true
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if w.open[n.Alias] {
			w.cycle = n
			return false
		}
		outer := w.via == nil
		if outer {
			w.via = n
		}
		if !w.walk(n.Alias) {
			return false
		}
		if outer {
			w.via = nil
		}
	} else {
		for _, c := range n.Content {
			if !w.walk(c) {
				return false
			}
		}
	}
	if n.Anchor != "" {
		delete(w.open, n)
	}
	if w.via == nil {
		w.literal = w.literal[:len(w.literal)-1]
	}
	return true
}

// fieldPath names the last node of path in the parser's style
// ("volumePolicies[0].action.parameters.x[2]"); path runs from the document
// node down, each node a child of the one before.
func fieldPath(path []*yaml.Node) string {
	var b strings.Builder
	for i := 1; i < len(path); i++ {
		parent, child := path[i-1], path[i]
		for j, c := range parent.Content {
			if c != child {
				continue
			}
			switch parent.Kind {
			case yaml.SequenceNode:
				fmt.Fprintf(&b, "[%d]", j)
			case yaml.MappingNode:
				if j%2 == 1 {
					if b.Len() > 0 {
						b.WriteByte('.')
					}
					b.WriteString(parent.Content[j-1].Value)
				}
			}
			break
		}
	}
	return b.String()
}
