package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// requestCounts are the API server's request counters
// (apiserver_request_total), summed over every label but the verb.
type requestCounts map[string]float64

// apiRequests scrapes the API server's /metrics. Taking the difference of
// two scrapes around a measurement tells how many calls a side made: the
// one fixed cost of a backup that CPU time and RSS do not show. The scrape
// itself is outside the timed window.
func apiRequests(ctx context.Context, k *kube) (requestCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body, err := k.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	counts := requestCounts{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	const metric = "apiserver_request_total{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		counts[label(line[len(metric):end], "verb")] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return counts, nil
}

// label returns the value of name in a Prometheus label set `a="x",b="y"`.
// Label values of this metric hold no commas or quotes.
func label(set, name string) string {
	for kv := range strings.SplitSeq(set, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// requestDelta is what the API server counted between two scrapes: all
// requests, and per verb (LIST, GET, POST, PATCH, WATCH, ...).
type requestDelta struct {
	Total int
	Verbs map[string]int
}

// delta returns the requests made between two scrapes. The scrapes
// themselves (GET /metrics) are not counted by this metric.
func (c requestCounts) delta(before requestCounts) requestDelta {
	d := requestDelta{Verbs: map[string]int{}}
	var t float64
	for verb, v := range c {
		n := v - before[verb]
		t += n
		if n != 0 {
			d.Verbs[verb] = int(n)
		}
	}
	d.Total = int(t)
	return d
}

// since returns the requests made between two scrapes: all verbs, and
// LISTs alone.
func (c requestCounts) since(before requestCounts) (total, lists int) {
	d := c.delta(before)
	return d.Total, d.Verbs["LIST"]
}
