package jsonmap

import (
	"encoding/json"
	"testing"
)

var benchInputs = []struct {
	name string
	data func() []byte
}{{"configmap", configMapJSON}, {"deployment", deploymentJSON}}

// BenchmarkDecode: a restore decodes every stored item once, with
// utiljson.Unmarshal before this package.
func BenchmarkDecode(b *testing.B) {
	for _, in := range benchInputs {
		data := in.data()
		for _, c := range []struct {
			name   string
			decode func([]byte) (map[string]any, error)
		}{{"jsonmap", Decode}, {"utiljson", reference}} {
			b.Run(in.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.decode(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkEncode: a restore encodes every item it creates once, with
// json.Marshal before this package.
func BenchmarkEncode(b *testing.B) {
	for _, in := range benchInputs {
		m, err := reference(in.data())
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name   string
			encode func(map[string]any) ([]byte, error)
		}{{"jsonmap", Encode}, {"encoding-json", func(m map[string]any) ([]byte, error) { return json.Marshal(m) }}} {
			b.Run(in.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.encode(m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
