package deletion

import (
	"errors"
	"testing"
)

// TestScanAheadStopsAtTheCallersError: an error from fn ends the scan with
// that error after fn saw the items before it, in order, and the reading
// goroutine is gone when scanAhead returns (the items channel drained).
func TestScanAheadStopsAtTheCallersError(t *testing.T) {
	w := newWorld(t)
	w.putTarball(manyItems(2000))
	stop := errors.New("enough")
	var seen []int64
	err := scanAhead(t.Context(), w.store, w.backup.Name, w.engine().Limits, func(it *tarItem) error {
		seen = append(seen, it.pos)
		if it.pos == 300 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("scanAhead returned %v, want the caller's error", err)
	}
	if len(seen) != 301 {
		t.Fatalf("fn saw %d items, want 301", len(seen))
	}
	for i, pos := range seen {
		if pos != int64(i) {
			t.Fatalf("item %d had position %d: not in tarball order", i, pos)
		}
	}
}
