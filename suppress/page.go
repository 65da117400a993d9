package suppress

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// Cursor is where a paged read of the list goes on (Page): the HSCAN
// cursor of a page and how many of that page's entries were read
// already, printed "<scan>:<skip>" ("<scan>" when skip is 0). A page read
// again from its cursor is the same while the list is unchanged; while
// it changes, an entry may show twice (as HSCAN's may) or, shifted
// within a page, be passed by. The zero Cursor is the list's start.
type Cursor struct {
	scan uint64
	skip int
}

func (c Cursor) String() string {
	if c.skip == 0 {
		return strconv.FormatUint(c.scan, 10)
	}
	return strconv.FormatUint(c.scan, 10) + ":" + strconv.Itoa(c.skip)
}

// ParseCursor reads a Cursor as String printed it; "" is the start.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	scan, skip, hasSkip := strings.Cut(s, ":")
	var c Cursor
	var err error
	if c.scan, err = strconv.ParseUint(scan, 10, 64); err != nil {
		return Cursor{}, errors.New("not a cursor the list printed")
	}
	if hasSkip {
		if c.skip, err = strconv.Atoi(skip); err != nil || c.skip < 0 {
			return Cursor{}, errors.New("not a cursor the list printed")
		}
	}
	return c, nil
}

// Page reads at most limit entries of the list (0: every one) from at,
// and reports whether more are left and the cursor they start at.
func (s *Store) Page(ctx context.Context, at Cursor, limit int) (entries []Entry, next Cursor, more bool, err error) {
	for {
		page, scanNext, err := s.scan(ctx, at.scan)
		if err != nil {
			return entries, at, false, err
		}
		for i := min(at.skip, len(page)); i < len(page); i++ {
			if limit > 0 && len(entries) == limit {
				return entries, Cursor{at.scan, i}, true, nil
			}
			entries = append(entries, page[i])
		}
		if scanNext == 0 {
			return entries, Cursor{}, false, nil
		}
		at = Cursor{scan: scanNext}
	}
}
