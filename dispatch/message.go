package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
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
}

// An InvalidError says why a message breaks the contract. Its text never
// holds the phone number or the body.
type InvalidError struct {
	Reason string // short code: bad_json, too_large, bad_id, bad_to, bad_body, bad_deadline, too_many_segments
	Detail string
}

func (e *InvalidError) Error() string { return e.Reason + ": " + e.Detail }

// wire is the JSON of docs/contract.md section 2; unknown fields are ignored.
type wire struct {
	ID       *string `json:"id"`
	To       *string `json:"to"`
	Body     *string `json:"body"`
	Deadline *string `json:"deadline"`
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
	var w wire
	if err := json.Unmarshal(trimmed, &w); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return invalid("bad_json", "field %q has the wrong type", typeErr.Field)
		}
		return invalid("bad_json", "data is not valid JSON")
	}

	m := Message{ID: pubsubID}
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
	m.Body = *w.Body
	if w.Deadline != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.Deadline)
		if err != nil {
			return invalid("bad_deadline", "deadline is not an RFC 3339 time")
		}
		m.Deadline = t
	}
	return m, nil
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

func validE164(s string) bool {
	if len(s) < 9 || len(s) > 16 || s[0] != '+' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
