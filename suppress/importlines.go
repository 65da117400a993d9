package suppress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// LinesBatch is how many entries ReadLines hands to apply at a time.
const LinesBatch = 10_000

// ReadLines reads JSON lines of entries from r (an export's, or
// {"number": ...} alone; blank lines skipped), gives reason to those
// that have none, and hands them to apply a batch of at most LinesBatch
// at a time; apply returns how many it added. A line that is no entry of
// an E.164 number stops it before anything of its batch is applied. read
// counts the entries read, added what apply added, whatever the error.
func ReadLines(r io.Reader, reason string, apply func([]Entry) (added int, err error)) (read, added int, err error) {
	batch := make([]Entry, 0, LinesBatch)
	flush := func() error {
		n, err := apply(batch)
		added += n
		batch = batch[:0]
		return err
	}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return read, added, fmt.Errorf("line %d: %v", line, err)
		}
		if _, err := Key(e.Number); err != nil {
			return read, added, fmt.Errorf("line %d: %s: %w", line, maskedForError(e.Number), err)
		}
		if e.Reason == "" {
			e.Reason = reason
		}
		read++
		if batch = append(batch, e); len(batch) == LinesBatch {
			if err := flush(); err != nil {
				return read, added, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return read, added, err
	}
	if err := flush(); err != nil {
		return read, added, err
	}
	return read, added, nil
}
