package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"

	"github.com/lifeboat-io/lifeboat/internal/listpage"
)

// pageSize is the LIST limit. Larger pages mean fewer round trips; 500 keeps
// a page of typical objects well under a few MiB in flight.
const pageSize = 500

// rawItem is one object of a LIST page, still as the API server's JSON.
type rawItem struct {
	Namespace string
	Name      string
	Labels    map[string]string
	// JSON is the object with apiVersion and kind set, which LIST responses
	// leave out for built-in types.
	JSON []byte
}

// itemHead is the part of an object the engine needs to route and filter
// it. Decoding only these fields keeps the object's bytes untouched.
type itemHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// pageLister LISTs a resource type page by page as raw JSON. It avoids the
// dynamic client on purpose: decoding every object into maps and encoding it
// again would cost more CPU than everything else in a backup.
type pageLister struct {
	client rest.Interface
}

// page is what one LIST call returned.
type page struct {
	Items []rawItem
	// Remaining estimates the items still to come, -1 when unknown.
	Remaining int64
	Continue  string
}

func (l pageLister) list(ctx context.Context, rt resourceType, ns, labelSelector, cont string) (*page, error) {
	return l.listLimit(ctx, rt, ns, labelSelector, cont, pageSize)
}

// listLimit LISTs with a given page size; 0 asks for everything at once.
func (l pageLister) listLimit(ctx context.Context, rt resourceType, ns, labelSelector, cont string, limit int) (*page, error) {
	req := l.client.Get().AbsPath(rt.listPath(ns)).SetHeader("Accept", "application/json")
	if limit > 0 {
		req = req.Param("limit", strconv.Itoa(limit))
	}
	if cont != "" {
		req = req.Param("continue", cont)
	}
	if labelSelector != "" {
		req = req.Param("labelSelector", labelSelector)
	}
	body, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", describeList(rt, ns), err)
	}
	lp, err := listpage.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("decoding list of %s: %w", describeList(rt, ns), err)
	}
	p := &page{Items: make([]rawItem, 0, len(lp.Items)), Continue: lp.Continue, Remaining: lp.Remaining}
	prefix := typePrefix(rt)
	for _, it := range lp.Items {
		p.Items = append(p.Items, rawItem{
			Namespace: it.Namespace,
			Name:      it.Name,
			Labels:    it.Labels,
			JSON:      withTypeMeta(it.JSON, it.APIVersion, it.Kind, prefix),
		})
	}
	return p, nil
}

// typePrefix is the opening of an object with its apiVersion and kind.
func typePrefix(rt resourceType) []byte {
	return []byte(`{"apiVersion":` + strconv.Quote(rt.GVR.GroupVersion().String()) +
		`,"kind":` + strconv.Quote(rt.Kind))
}

// withTypeMeta returns raw with apiVersion and kind added when the list left
// them out (built-in types); custom resources carry them already.
func withTypeMeta(raw []byte, apiVersion, kind string, prefix []byte) []byte {
	if apiVersion != "" && kind != "" {
		return raw
	}
	body := bytes.TrimLeft(raw, " \t\r\n")
	body = body[1:] // the object's opening brace
	out := make([]byte, 0, len(prefix)+1+len(body))
	out = append(out, prefix...)
	if len(bytes.TrimLeft(body, " \t\r\n")) > 0 && bytes.TrimLeft(body, " \t\r\n")[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body...)
}

func describeList(rt resourceType, ns string) string {
	if ns == "" {
		return rt.GroupResource().String()
	}
	return rt.GroupResource().String() + " in namespace " + ns
}

// get reads one object, as the API server stores it.
func (l pageLister) get(ctx context.Context, rt resourceType, ns, name string) (rawItem, error) {
	body, err := l.client.Get().AbsPath(rt.listPath(ns), name).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return rawItem{}, fmt.Errorf("getting %s %s: %w", rt.GroupResource(), name, err)
	}
	var head itemHead
	if err := json.Unmarshal(body, &head); err != nil {
		return rawItem{}, fmt.Errorf("decoding %s %s: %w", rt.GroupResource(), name, err)
	}
	return rawItem{Namespace: head.Metadata.Namespace, Name: head.Metadata.Name, Labels: head.Metadata.Labels,
		JSON: withTypeMeta(body, head.APIVersion, head.Kind, typePrefix(rt))}, nil
}
