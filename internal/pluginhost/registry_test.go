package pluginhost

import (
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

func TestRegistry(t *testing.T) {
	r := newRegistry()
	if _, err := r.add(Entry{Kind: api.KindObjectStore, Name: "velero.io/aws", Binary: BuiltIn}); err != nil {
		t.Fatal(err)
	}
	// A plugin binary may replace a built-in...
	replaced, err := r.add(Entry{Kind: api.KindObjectStore, Name: "velero.io/aws", Binary: "/plugins/velero-plugin-for-aws"})
	if err != nil || replaced == nil || replaced.Binary != BuiltIn {
		t.Fatalf("replacing a built-in: %v %v", replaced, err)
	}
	// ...but two binaries may not provide one plugin.
	_, err = r.add(Entry{Kind: api.KindObjectStore, Name: "velero.io/aws", Binary: "/plugins/other"})
	if err == nil || !strings.Contains(err.Error(), "/plugins/velero-plugin-for-aws") || !strings.Contains(err.Error(), "/plugins/other") {
		t.Errorf("duplicate: %v", err)
	}
	// The same name under another kind is another plugin.
	if _, err := r.add(Entry{Kind: api.KindDeleteItemAction, Name: "velero.io/aws", Binary: "/plugins/other"}); err != nil {
		t.Errorf("other kind: %v", err)
	}
	if e, ok := r.get(api.KindObjectStore, "aws"); !ok || e.Binary != "/plugins/velero-plugin-for-aws" {
		t.Errorf("a name without a prefix finds velero.io/: %v %v", e, ok)
	}
	if list := r.list(); len(list) != 2 || list[0].Kind != api.KindDeleteItemAction {
		t.Errorf("list %+v", list)
	}
}
