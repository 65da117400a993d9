package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Message is what `dispatcher message <id>` prints: the id's story on
// every account that holds some of it. Its JSON (`message --json`) is
// stable: fields are added, never renamed. It holds no phone number and
// no body: the records hold none.
type Message struct {
	ID       string         `json:"id"`
	Accounts []MessageStory `json:"accounts"`
}

// MessageStory is the story of a Message on one account.
type MessageStory struct {
	Account string `json:"account"`
	// Record is the send-once record: "sent", "claim" (a send in flight),
	// "refused:<reason>", "rejected"; "" none.
	Record   string `json:"record"`
	Attempts int    `json:"attempts"`
	Class    string `json:"class,omitempty"`
	// Sender is the sender it went from; "" the adapter's own.
	Sender      string   `json:"sender,omitempty"`
	ProviderIDs []string `json:"provider_ids"`
	SentAt      string   `json:"sent_at,omitempty"` // RFC 3339, UTC
	// Status is the delivery state the receipts folded to; "" none yet.
	Status    string `json:"status,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
	StatusAt  string `json:"status_at,omitempty"`
	// Parts is each part's state by provider id, for a message of several
	// parts.
	Parts map[string]string `json:"parts,omitempty"`
	// Owed: the status event of the state is not yet published.
	Owed bool `json:"owed"`
	// Resent: the message's failure was sent once more through the next
	// account.
	Resent bool `json:"resent"`
	// Resend: the account sent the message as a resend (its record is
	// the resend's own).
	Resend bool `json:"resend"`
}

// stamp is t as a MessageStory says it: "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// Found reports whether any account holds some of m's story.
func (m Message) Found() bool { return len(m.Accounts) > 0 }

// WriteText prints m for a person.
func (m Message) WriteText(w io.Writer) {
	if !m.Found() {
		fmt.Fprintf(w, "no record of %s on any account\n", m.ID)
		return
	}
	fmt.Fprintf(w, "message %s\n", m.ID)
	for _, s := range m.Accounts {
		record := s.Record
		if record == "" {
			record = "no send-once record"
		}
		as := ""
		if s.Resend {
			as = " (as a resend)"
		}
		fmt.Fprintf(w, "account %s: %s, %d attempt%s%s\n", s.Account, record, s.Attempts, plural(s.Attempts), as)
		if s.Class != "" {
			sender := s.Sender
			if sender == "" {
				sender = "the adapter's"
			}
			fmt.Fprintf(w, "  class %s, sender %s\n", s.Class, sender)
		}
		if s.SentAt != "" || len(s.ProviderIDs) > 0 {
			fmt.Fprintf(w, "  sent at %s, provider id%s %s\n", orNone(s.SentAt), plural(len(s.ProviderIDs)), orNone(strings.Join(s.ProviderIDs, ", ")))
		}
		switch {
		case s.Status == "":
			fmt.Fprintln(w, "  receipt none yet")
		default:
			line := "  receipt " + s.Status
			if s.ErrorCode != "" {
				line += ", error " + s.ErrorCode
			}
			if s.StatusAt != "" {
				line += ", at " + s.StatusAt
			}
			fmt.Fprintln(w, line)
		}
		if len(s.Parts) > 1 {
			ids := make([]string, 0, len(s.Parts))
			for id := range s.Parts {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = id + " " + s.Parts[id]
			}
			fmt.Fprintf(w, "  parts %s\n", strings.Join(parts, ", "))
		}
		if s.Owed {
			fmt.Fprintln(w, "  status event owed: not yet published")
		}
		if s.Resent {
			fmt.Fprintln(w, "  resent once through the next account")
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
