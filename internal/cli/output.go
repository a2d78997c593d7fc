package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"

	// none marks an empty value in tables and descriptions, as kubectl does.
	none = "<none>"
)

// outputScheme only maps Go types to their kinds for printing; it is not the
// client's scheme, so a test client with a partial scheme prints the same.
var outputScheme = sync.OnceValues(NewScheme)

// checkFormat rejects an -o value early, before any API call.
func checkFormat(format string, allowed ...string) error {
	if slices.Contains(allowed, format) {
		return nil
	}
	return fmt.Errorf("invalid --output %q: must be one of %s", format, strings.Join(allowed, ", "))
}

// setTypeMeta fills apiVersion and kind, which typed clients leave empty
// after a read, so that printed objects can be fed back to kubectl apply.
// Lists get it on every item too.
func setTypeMeta(obj runtime.Object) error {
	scheme, err := outputScheme()
	if err != nil {
		return err
	}
	set := func(o runtime.Object) error {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return fmt.Errorf("finding the kind of %T: %w", o, err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvk)
		return nil
	}
	if err := set(obj); err != nil {
		return err
	}
	if meta.IsListType(obj) {
		return meta.EachListItem(obj, set)
	}
	return nil
}

// hideManagedFields drops server-side-apply bookkeeping from printed
// objects, as kubectl does by default; it is noise to a reader.
func hideManagedFields(obj runtime.Object) error {
	hide := func(o runtime.Object) error {
		acc, err := meta.Accessor(o)
		if err != nil {
			return fmt.Errorf("reading the metadata of %T: %w", o, err)
		}
		acc.SetManagedFields(nil)
		return nil
	}
	if meta.IsListType(obj) {
		return meta.EachListItem(obj, hide)
	}
	return hide(obj)
}

// printEncoded writes obj as JSON or YAML with its type set. The object is
// modified (type set, managed fields hidden), so callers pass copies they
// no longer need.
func printEncoded(w io.Writer, format string, obj runtime.Object) error {
	if err := setTypeMeta(obj); err != nil {
		return err
	}
	if err := hideManagedFields(obj); err != nil {
		return err
	}
	return encode(w, format, obj)
}

// encode writes any value as indented JSON or YAML.
func encode(w io.Writer, format string, v any) error {
	var (
		data []byte
		err  error
	)
	switch format {
	case formatJSON:
		data, err = json.MarshalIndent(v, "", "    ")
		if err == nil {
			data = append(data, '\n')
		}
	case formatYAML:
		data, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("unsupported output format %q", format)
	}
	if err != nil {
		return fmt.Errorf("encoding output as %s: %w", format, err)
	}
	_, err = w.Write(data)
	return err
}

// newTable aligns columns the way kubectl's tables are aligned.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

// formatTime prints an absolute time in the reader's zone; "<n/a>" for
// times not reached yet.
func (f *Factory) formatTime(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "<n/a>"
	}
	return t.In(f.location()).Format("2006-01-02 15:04:05 -0700 MST")
}

// relativeTime prints how far in the future (or past) t is, like Velero's
// EXPIRES column: "29d", "3h ago", or "n/a".
func (f *Factory) relativeTime(t time.Time) string {
	if t.IsZero() {
		return "n/a"
	}
	now := f.now()
	if !t.Before(now) {
		return duration.ShortHumanDuration(t.Sub(now))
	}
	return duration.ShortHumanDuration(now.Sub(t)) + " ago"
}
