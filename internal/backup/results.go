package backup

import "sync"

// Result is the errors or warnings of a backup, grouped as Velero's results
// file groups them: about the server itself, cluster-scoped items, and each
// namespace.
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

// Results is the content of the `<backup>-results.gz` file.
type Results struct {
	Errors   Result `json:"errors"`
	Warnings Result `json:"warnings"`
}

// resultsRecorder collects results from concurrent listers.
type resultsRecorder struct {
	mu sync.Mutex
	r  Results
}

func (rr *resultsRecorder) error(namespace, msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Errors.add(namespace, msg)
}

func (rr *resultsRecorder) warning(namespace, msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Warnings.add(namespace, msg)
}

func (rr *resultsRecorder) serverError(msg string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.r.Errors.Velero = append(rr.r.Errors.Velero, msg)
}

func (rr *resultsRecorder) snapshot() Results {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.r
}
