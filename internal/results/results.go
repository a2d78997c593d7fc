// Package results holds the warnings and errors of a backup or restore in
// the shape of Velero's results file (`<name>-results.gz`).
package results

import "sync"

// Result is the errors or warnings of a run, grouped as Velero groups them:
// about the server itself, cluster-scoped items, and each namespace.
type Result struct {
	Velero     []string            `json:"velero,omitempty"`
	Cluster    []string            `json:"cluster,omitempty"`
	Namespaces map[string][]string `json:"namespaces,omitempty"`
}

func (r *Result) add(namespace, msg string) {
	if namespace == "" {
		r.Cluster = append(r.Cluster, msg)
		return
	}
	if r.Namespaces == nil {
		r.Namespaces = map[string][]string{}
	}
	r.Namespaces[namespace] = append(r.Namespaces[namespace], msg)
}

// Count is the number of messages.
func (r *Result) Count() int {
	n := len(r.Velero) + len(r.Cluster)
	for _, msgs := range r.Namespaces {
		n += len(msgs)
	}
	return n
}

// Results is the content of a results file.
type Results struct {
	Errors   Result `json:"errors"`
	Warnings Result `json:"warnings"`
}

// Recorder collects results from concurrent workers.
type Recorder struct {
	mu sync.Mutex
	r  Results
}

// Error records a per-item error; namespace is empty for cluster-scoped items.
func (rr *Recorder) Error(namespace, msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Errors.add(namespace, msg)
}

// Warning records a per-item warning; namespace is empty for cluster-scoped items.
func (rr *Recorder) Warning(namespace, msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Warnings.add(namespace, msg)
}

// ServerError records an error that is not about one item.
func (rr *Recorder) ServerError(msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Errors.Velero = append(rr.r.Errors.Velero, msg)
}

// Snapshot returns a copy of what was recorded so far.
func (rr *Recorder) Snapshot() Results {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.r
}
