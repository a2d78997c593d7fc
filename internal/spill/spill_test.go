package spill

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func TestSortedGivesBackEveryStringInOrderAcrossRuns(t *testing.T) {
	for _, chunk := range []int{300, 10_000, DefaultChunkBytes} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			dir := t.TempDir()
			s := New(dir, chunk)
			rng := rand.New(rand.NewPCG(7, uint64(chunk)))
			var want []string
			for range 2000 {
				// Duplicates and prefixes of one another on purpose.
				v := fmt.Sprintf("k%d", rng.IntN(700))
				if rng.IntN(3) == 0 {
					v += "/sub"
				}
				s.Add(v)
				want = append(want, v)
			}
			if chunk < 10_000 && s.Spilled() < 2 {
				t.Fatalf("chunk of %d bytes spilled %d runs, want several", chunk, s.Spilled())
			}
			next, stop, err := s.Sorted()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				v, ok, err := next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, v)
			}
			stop()
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d strings, want %d, or out of order", len(got), len(want))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("Close left %d files", len(left))
			}
			if _, _, err := s.Sorted(); err == nil {
				t.Fatal("Sorted after Close: no error")
			}
		})
	}
}

func TestATruncatedRunIsAnErrorNotAShortList(t *testing.T) {
	dir := t.TempDir()
	s := New(dir, 1)
	defer s.Close()
	s.Add("aaaa")
	s.Add("bbbb")
	if err := os.Truncate(s.runs[0], 2); err != nil {
		t.Fatal(err)
	}
	next, stop, err := s.Sorted()
	if err != nil {
		return // found at the start of the merge
	}
	defer stop()
	for {
		_, ok, err := next()
		if err != nil {
			return
		}
		if !ok {
			t.Fatal("a truncated run ended the strings without an error")
		}
	}
}
