package policy

import (
	"strings"
)

// FieldError is one problem in a resource policy: where it is and what is
// allowed there. Its message is what a Backup's validation errors and
// `lifeboat policy validate` show, so it has to make sense without the
// surrounding YAML.
type FieldError struct {
	// Field is the path of the offending key, e.g.
	// "volumePolicies[2].conditions.capacity"; empty for problems with the
	// document as a whole (a YAML syntax error, an empty document).
	Field string
	// Message says what is wrong and what would be accepted.
	Message string
	// Line is the 1-based line in the policy YAML, 0 when unknown. It is
	// kept out of Error() so a message reads the same wherever the policy
	// came from (a file, a ConfigMap value, a test string).
	Line int
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ValidationError holds every problem found in one policy, in document
// order, so a user fixes them in one round instead of one per backup.
type ValidationError struct {
	// Source names where the policy came from ("ConfigMap velero/my-policy");
	// empty for bytes handed to Parse.
	Source   string
	Problems []*FieldError
}

// Messages returns one line per problem, prefixed with the source when
// there is one.
func (e *ValidationError) Messages() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if e.Source != "" {
			out[i] = e.Source + ": " + p.Error()
		} else {
			out[i] = p.Error()
		}
	}
	return out
}

func (e *ValidationError) Error() string {
	return strings.Join(e.Messages(), "\n")
}

// Unwrap exposes each problem to errors.As, as errors.Join would.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}
