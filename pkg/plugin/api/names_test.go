package api

import "testing"

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"example.io/annotate", true},
		{"velero.io/aws", true},
		{"lifeboat.io/delete-labelled-resources", true},
		{"annotate", false},
		{"/annotate", false},
		{"example.io/", false},
		{"Example.IO/annotate", false},
		{"example.io/a/b", false},
		{"example_io/annotate", false},
	} {
		if err := ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if got := NormalizeName("aws"); got != "velero.io/aws" {
		t.Errorf("NormalizeName(aws) = %q", got)
	}
	if got := NormalizeName("example.io/x"); got != "example.io/x" {
		t.Errorf("NormalizeName kept-prefix = %q", got)
	}
}
