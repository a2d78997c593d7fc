package v1

import (
	"strings"
	"testing"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 80)
	got := LabelValue(long)
	if len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("a", 57)) {
		t.Errorf("LabelValue(80 a's) = %q, want 57 a's and 6 hex digits", got)
	}
	if LabelValue(long+"b") == got {
		t.Error("two long names map to the same label value")
	}
	if LabelValue("short") != "short" {
		t.Error("short names must be kept")
	}
}
