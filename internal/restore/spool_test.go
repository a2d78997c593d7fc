package restore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
)

// TestTheFirstCopyOfAnItemWinsWhereverTheOthersAre: the copies of an item
// side by side (as Lifeboat and Velero write them) and apart (an archive
// made otherwise) are restored once, from the first copy, even when the
// first was filtered out and a later one would pass the filter.
func TestTheFirstCopyOfAnItemWinsWhereverTheOthersAre(t *testing.T) {
	cm := func(name, keep, value string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":%q,"labels":{"keep":%q}},"data":{"v":%q}}`, name, keep, value)
	}
	flat := func(name string) string { return "resources/configmaps/namespaces/ns/" + name + ".json" }
	preferred := func(name string) string {
		return "resources/configmaps/v1-preferredversion/namespaces/ns/" + name + ".json"
	}
	var tarball bytes.Buffer
	if err := archivetest.Tarball(&tarball, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: flat("a"), Data: cm("a", "yes", "first")},
		{Name: preferred("a"), Data: cm("a", "yes", "side by side")},
		{Name: flat("b"), Data: cm("b", "yes", "first")},
		{Name: flat("a"), Data: cm("a", "yes", "apart")},
		{Name: flat("c"), Data: cm("c", "no", "first")},
		{Name: flat("e"), Data: cm("e", "yes", "first")},
		{Name: flat("d"), Data: cm("d", "yes", "first")},
		{Name: preferred("c"), Data: cm("c", "yes", "apart, would pass")},
		{Name: preferred("e"), Data: cm("e", "no", "apart, filtered out")},
	}); err != nil {
		t.Fatal(err)
	}
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprint("indexed=", indexed), func(t *testing.T) {
			s, err := newSpool(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if indexed {
				s.index = map[string]spoolRef{}
			}
			keep := func(_ archive.ItemRef, data []byte) (bool, error) {
				labels, err := itemLabels(data)
				return labels["keep"] == "yes", err
			}
			if err := s.fill(bytes.NewReader(tarball.Bytes()), archive.Limits{}, keep); err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := s.each("configmaps", func(it spooledItem) error {
				var obj struct {
					Data map[string]string `json:"data"`
				}
				if err := json.Unmarshal(it.JSON, &obj); err != nil {
					return err
				}
				got = append(got, it.Name+"="+obj.Data["v"])
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if want := "[a=first b=first e=first d=first]"; fmt.Sprint(got) != want {
				t.Errorf("restored %v, want %s", got, want)
			}
			// e's later copy, filtered out, was never spooled: it takes
			// nothing off the total.
			if n := s.total(); n != 4 {
				t.Errorf("total %d, want 4", n)
			}
			if !indexed {
				return
			}
			if it, ok, err := s.lookup("configmaps", "ns", "a"); err != nil || !ok || !bytes.Contains(it.JSON, []byte(`"first"`)) {
				t.Errorf("lookup of a: %v %v %s, want its first copy", ok, err, it.JSON)
			}
			if _, ok, err := s.lookup("configmaps", "ns", "c"); err != nil || ok {
				t.Errorf("lookup of c: found %v (%v), want nothing: its first copy was filtered out", ok, err)
			}
		})
	}
}
