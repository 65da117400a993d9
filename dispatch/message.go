package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode"
	"unicode/utf8"

	"smsdispatcher/ledger"
	"smsdispatcher/window"
)

// Limits of docs/contract.md section 2.
const (
	MaxDataBytes = 64 << 10
	MaxIDLen     = 128
	MaxBodyRunes = 1600
)

// Message is one SMS to send, as a producer published it.
type Message struct {
	// ID is the idempotency key: the producer's id, or the Pub/Sub message
	// ID when the producer gave none.
	ID       string
	To       string
	Body     string
	Deadline time.Time // zero: none
	// ResendOnFailure lets a first-class message whose final receipt says
	// it did not arrive be sent once more, through another account (JSON
	// "resend_on_failure"; default true).
	ResendOnFailure bool
	// TZ is the recipient's IANA zone as its producer knows it (JSON
	// "tz"), "" when not given: the class's send windows read the
	// recipient's hours in it rather than in the number's zones.
	TZ string

	// resend is the Pub/Sub data a failed delivery sends once more
	// (ledger.Story.Resend), set by handle when the message may be
	// resent; never by Decode.
	resend []byte
	// resent says the message is a resend (attr.ResendAvoid): its
	// send-once record is its own (recordID), set by handle.
	resent bool
}

// recordID is the id m's send-once record is kept under: its id, or for
// a resend ledger.ResendID's.
func (m Message) recordID() string {
	if m.resent {
		return ledger.ResendID(m.ID)
	}
	return m.ID
}

// An InvalidError says why a message breaks the contract. Its text never
// holds the phone number or the body.
type InvalidError struct {
	Reason string // short code: bad_json, duplicate_field, too_large, bad_id, bad_to, bad_body, bad_deadline, bad_tz, too_many_segments, handler_panic
	Detail string
}

func (e *InvalidError) Error() string { return e.Reason + ": " + e.Detail }

// wire is the JSON of docs/contract.md section 2: the fields readWire
// fills, nil when absent (or null).
type wire struct {
	ID, To, Body, Deadline, TZ *string
	ResendOnFailure            *bool
}

// Decode parses and validates one message's data. pubsubID stands in for a
// missing id. A message that breaks a rule returns an *InvalidError.
func Decode(data []byte, pubsubID string) (Message, error) {
	invalid := func(reason, format string, args ...any) (Message, error) {
		return Message{}, &InvalidError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxDataBytes {
		return invalid("too_large", "data is %d bytes, the limit is %d", len(data), MaxDataBytes)
	}
	if !utf8.Valid(data) {
		return invalid("bad_json", "data is not UTF-8")
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return invalid("bad_json", "data is not a JSON object")
	}
	w, err := readWire(trimmed)
	if err != nil {
		return Message{}, err
	}

	m := Message{ID: pubsubID, ResendOnFailure: w.ResendOnFailure == nil || *w.ResendOnFailure}
	if w.ID != nil {
		if !validID(*w.ID) {
			return invalid("bad_id", "id must be 1-%d printable ASCII characters", MaxIDLen)
		}
		m.ID = *w.ID
	}
	if w.To == nil || !validE164(*w.To) {
		return invalid("bad_to", "to must be E.164: + then 8-15 digits")
	}
	m.To = *w.To
	if w.Body == nil {
		return invalid("bad_body", "body is missing")
	}
	if n := utf8.RuneCountInString(*w.Body); n < 1 || n > MaxBodyRunes {
		return invalid("bad_body", "body must be 1-%d characters, got %d", MaxBodyRunes, n)
	}
	for _, r := range *w.Body {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return invalid("bad_body", "body holds the control character U+%04X", r)
		}
	}
	m.Body = *w.Body
	if w.Deadline != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.Deadline)
		if err != nil {
			return invalid("bad_deadline", "deadline is not an RFC 3339 time")
		}
		if t.IsZero() {
			// The zero time is how Message says "no deadline".
			return invalid("bad_deadline", "deadline is the zero time")
		}
		m.Deadline = t
	}
	if w.TZ != nil {
		if _, err := window.ParseZone(*w.TZ); err != nil {
			return invalid("bad_tz", "tz is not an IANA zone such as Europe/Paris")
		}
		m.TZ = *w.TZ
	}
	return m, nil
}

// PayloadDeadline is the deadline data, a message's payload, holds (WithID
// writes one into every payload a resend keeps); zero when it holds none
// or does not decode. The receipts read a resend's window by it.
func PayloadDeadline(data []byte) time.Time {
	m, err := Decode(data, "")
	if err != nil {
		return time.Time{}
	}
	return m.Deadline
}

// WithID returns data, a valid message, with the id and the deadline it
// lacks written first into its object, everything else byte for byte: a
// copy published again (a resend, a replayed dead letter) then keeps the
// send-once record and the window of the message it copies, whatever its
// own Pub/Sub message ID and whenever it arrives. An id or a deadline the
// data has is kept, a zero deadline not written; data itself is returned
// when the result would not decode to id and that deadline.
func WithID(data []byte, id string, deadline time.Time) []byte {
	m, err := Decode(data, "")
	if err != nil {
		return data
	}
	var fields []byte
	if m.ID == "" {
		q, _ := json.Marshal(id) // a string: it cannot fail
		fields = append(append(append(fields, `"id":`...), q...), ',')
		m.ID = id
	}
	if m.Deadline.IsZero() && !deadline.IsZero() {
		fields = append(append(append(fields, `"deadline":"`...), deadline.UTC().Format(time.RFC3339Nano)...), `",`...)
		m.Deadline = deadline
	}
	if len(fields) == 0 {
		return data
	}
	i := bytes.IndexByte(data, '{')
	out := make([]byte, 0, len(data)+len(fields))
	out = append(append(append(out, data[:i+1]...), fields...), data[i+1:]...)
	if got, err := Decode(out, ""); err != nil || got.ID != m.ID || !got.Deadline.Equal(m.Deadline) {
		return data
	}
	return out
}

// readWire reads data, a JSON object, as a strict reader would: a field
// is one of the contract's only when its name is exactly "id", "to",
// "body", "deadline", "resend_on_failure" or "tz" (after JSON unescaping; "To"
// is an unknown field), and a name given twice, known or not, is invalid
// (duplicate_field): a validator upstream that keeps the first of two
// values, or matches names in another way, would have read another message
// than this one.
func readWire(data []byte) (wire, error) {
	badJSON := &InvalidError{Reason: "bad_json", Detail: "data is not valid JSON"}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the '{' Decode checked
		return wire{}, badJSON
	}
	var w wire
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return wire{}, badJSON
		}
		var field any // a pointer to one of w's fields, nil for an unknown name
		switch key {
		case "id":
			field = &w.ID
		case "to":
			field = &w.To
		case "body":
			field = &w.Body
		case "deadline":
			field = &w.Deadline
		case "resend_on_failure":
			field = &w.ResendOnFailure
		case "tz":
			field = &w.TZ
		}
		if seen[key] {
			detail := "a field appears more than once"
			if field != nil { // a producer's own names stay out of the reason
				detail = fmt.Sprintf("field %q appears more than once", key)
			}
			return wire{}, &InvalidError{Reason: "duplicate_field", Detail: detail}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return wire{}, badJSON
		}
		if field != nil && json.Unmarshal(raw, field) != nil {
			return wire{}, &InvalidError{Reason: "bad_json", Detail: fmt.Sprintf("field %q has the wrong type", key)}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return wire{}, badJSON
	}
	if _, err := dec.Token(); err != io.EOF { // nothing after the object
		return wire{}, badJSON
	}
	return w, nil
}

func validID(s string) bool {
	if len(s) < 1 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validE164 reports whether s is + and 8-15 digits, the first not 0: no
// ITU country code starts with 0.
func validE164(s string) bool {
	if len(s) < 9 || len(s) > 16 || s[0] != '+' || s[1] == '0' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
