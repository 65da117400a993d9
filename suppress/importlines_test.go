package suppress

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestReadLinesBatchesFillsTheReasonAndStopsAtABadLine: entries are handed
// over in batches of LinesBatch, the last one short; an entry without a
// reason gets the one given; a line that is no entry of an E.164 number
// stops the read before its batch is applied, naming the line and not
// the number in clear.
func TestReadLinesBatchesFillsTheReasonAndStopsAtABadLine(t *testing.T) {
	var in strings.Builder
	n := LinesBatch + 3
	for i := range n {
		if i == 1 {
			in.WriteString("\n") // blank lines are skipped
		}
		fmt.Fprintf(&in, `{"number":"+8190%08d"%s}`+"\n", i, map[bool]string{true: `,"reason":"own"`}[i == 0])
	}
	var sizes []int
	var got []Entry
	read, added, err := ReadLines(strings.NewReader(in.String()), "given", func(b []Entry) (int, error) {
		sizes = append(sizes, len(b))
		got = append(got, b...)
		return len(b) - 1, nil // one of each batch on the list already
	})
	if err != nil || read != n || added != n-2 {
		t.Fatalf("read %d, added %d, %v; want %d, %d, nil", read, added, err, n, n-2)
	}
	if len(sizes) != 2 || sizes[0] != LinesBatch || sizes[1] != 3 {
		t.Fatalf("batches of %v, want [%d 3]", sizes, LinesBatch)
	}
	if got[0].Reason != "own" || got[1].Reason != "given" || got[n-1].Number != fmt.Sprintf("+8190%08d", n-1) {
		t.Fatalf("entries %+v, %+v, %+v", got[0], got[1], got[n-1])
	}

	applied := 0
	bad := "{\"number\":\"+819012345678\"}\n{\"number\":\"09012345678\"}\n"
	read, _, err = ReadLines(strings.NewReader(bad), "", func(b []Entry) (int, error) { applied += len(b); return len(b), nil })
	if !errors.Is(err, ErrNotE164) || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "09012345678") {
		t.Fatalf("a line that is no E.164 number: %v", err)
	}
	if read != 1 || applied != 0 {
		t.Fatalf("read %d, applied %d before the bad line; want 1 read, nothing applied", read, applied)
	}
	if _, _, err := ReadLines(strings.NewReader("{not json\n"), "", func(b []Entry) (int, error) { return 0, nil }); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a line that is no JSON: %v", err)
	}
}
