package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"cloud.google.com/go/pubsub/v2"
)

// Listing is what List read.
type Listing struct {
	Letters []*Letter // the selected ones, by publish time, then message ID
	Read    int       // dead letters read, selected or not
	Limited bool      // reading stopped at Inspect.Limit: there may be more
}

// List reads the dead letters of in.Subscription and returns those f
// selects, consuming none: each one read is given back (a nack) before
// List returns, so listing twice shows the same ones.
func List(ctx context.Context, ps *pubsub.Client, in Inspect, f Filter) (Listing, error) {
	f = f.withNow(time.Now())
	r := newReader(ps, in, 100)
	var ls Listing
	err := r.read(ctx, func(l *Letter) {
		ls.Read++
		if f.match(l) {
			ls.Letters = append(ls.Letters, l)
		}
	})
	if err != nil {
		return Listing{}, err
	}
	slices.SortFunc(ls.Letters, func(a, b *Letter) int {
		if c := a.Published.Compare(b.Published); c != 0 {
			return c
		}
		return strings.Compare(a.MessageID, b.MessageID)
	})
	ls.Limited = r.limited
	return ls, nil
}

// JSON is one line of `deadletters list --json`. The field names are
// stable (docs/levers.md, "Dead letters").
type JSON struct {
	PublishTime       string  `json:"publish_time"`
	MessageID         string  `json:"message_id"`
	OriginalMessageID string  `json:"original_message_id"`
	ID                string  `json:"id"`
	Class             string  `json:"class"`
	RejectReason      string  `json:"reject_reason"`
	ToMasked          string  `json:"to_masked"`
	BodyChars         int     `json:"body_chars"`
	Replays           int     `json:"replays"`
	Body              *string `json:"body,omitempty"`
}

// WriteJSON writes one JSON object per letter, a line each; the body only
// when withBody.
func WriteJSON(w io.Writer, letters []*Letter, withBody bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, l := range letters {
		v := JSON{
			PublishTime: l.Published.Format(time.RFC3339Nano), MessageID: l.MessageID, OriginalMessageID: l.OriginalID,
			ID: l.ID, Class: l.Class, RejectReason: l.Reason, ToMasked: l.MaskedTo(), BodyChars: l.BodyChars(), Replays: l.Replays,
		}
		if withBody && l.hasBody {
			v.Body = &l.body
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes the letters as a table, a line each, with a header;
// the bodies, quoted, only when withBody. Control characters in what a
// producer or a provider wrote become spaces, so that each letter stays on
// its line.
func WriteTable(w io.Writer, letters []*Letter, withBody bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := "PUBLISHED\tID\tCLASS\tTO\tCHARS\tREPLAYS\tREASON"
	if withBody {
		head += "\tBODY"
	}
	fmt.Fprintln(tw, head)
	for _, l := range letters {
		chars := "-"
		if l.hasBody {
			chars = strconv.Itoa(l.BodyChars())
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s", l.Published.Format(time.RFC3339), printable(dash(l.ID)), dash(l.Class),
			dash(l.MaskedTo()), chars, l.Replays, printable(dash(l.Reason)))
		if withBody {
			body := "-"
			if l.hasBody {
				body = strconv.Quote(l.body)
			}
			line += "\t" + body
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// printable replaces control characters (a reason may hold a provider's
// answer), so that each dead letter stays on its line.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
