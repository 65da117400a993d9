package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		want   Message
		reason string // "" when valid
	}{
		{"full", `{"id":"login-7f3a9c","to":"+819012345678","body":"Your code is 482913","deadline":"2026-11-29T12:00:05Z"}`,
			Message{ID: "login-7f3a9c", ResendOnFailure: true, To: "+819012345678", Body: "Your code is 482913", Deadline: time.Date(2026, 11, 29, 12, 0, 5, 0, time.UTC)}, ""},
		{"no id uses the pubsub id", `{"to":"+819012345678","body":"hi"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+819012345678", Body: "hi"}, ""},
		{"unknown fields ignored", `{"to":"+12345678","body":"hi","x":[1,2]}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi"}, ""},
		{"body of 1600 code points", `{"to":"+12345678","body":"` + strings.Repeat("é", 1600) + `"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: strings.Repeat("é", 1600)}, ""},
		{"not json", `hello`, Message{}, "bad_json"},
		{"json array", `[1]`, Message{}, "bad_json"},
		{"truncated json", `{"to":"+12345678"`, Message{}, "bad_json"},
		{"to is a number", `{"to":819012345678,"body":"hi"}`, Message{}, "bad_json"},
		{"no to", `{"body":"hi"}`, Message{}, "bad_to"},
		{"to without plus", `{"to":"819012345678","body":"hi"}`, Message{}, "bad_to"},
		{"to too short", `{"to":"+1234567","body":"hi"}`, Message{}, "bad_to"},
		{"to too long", `{"to":"+1234567890123456","body":"hi"}`, Message{}, "bad_to"},
		{"to with a space", `{"to":"+81 9012345678","body":"hi"}`, Message{}, "bad_to"},
		{"empty body", `{"to":"+12345678","body":""}`, Message{}, "bad_body"},
		{"no body", `{"to":"+12345678"}`, Message{}, "bad_body"},
		{"body too long", `{"to":"+12345678","body":"` + strings.Repeat("a", 1601) + `"}`, Message{}, "bad_body"},
		{"empty id", `{"id":"","to":"+12345678","body":"hi"}`, Message{}, "bad_id"},
		{"id too long", `{"id":"` + strings.Repeat("a", 129) + `","to":"+12345678","body":"hi"}`, Message{}, "bad_id"},
		{"id not ascii", `{"id":"ログイン","to":"+12345678","body":"hi"}`, Message{}, "bad_id"},
		{"bad deadline", `{"to":"+12345678","body":"hi","deadline":"tomorrow"}`, Message{}, "bad_deadline"},
		{"too large", `{"to":"+12345678","body":"hi","pad":"` + strings.Repeat("a", MaxDataBytes) + `"}`, Message{}, "too_large"},
		{"not utf-8", "{\"to\":\"+12345678\",\"body\":\"\xff\"}", Message{}, "bad_json"},
		// Read as a strict validator upstream reads it.
		{"a name in another case is an unknown field", `{"To":"+19012345678","to":"+12345678","body":"hi"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi"}, ""},
		{"only a name in another case: no to", `{"TO":"+12345678","body":"hi"}`, Message{}, "bad_to"},
		{"an escaped name is its unescaped self", `{"\u0074o":"+12345678","body":"hi"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi"}, ""},
		{"to given twice", `{"to":"+12345678","body":"hi","to":"+19012345678"}`, Message{}, "duplicate_field"},
		{"to given twice, once escaped", `{"to":"+12345678","body":"hi","\u0074o":"+19012345678"}`, Message{}, "duplicate_field"},
		{"id given twice", `{"id":"a","id":"b","to":"+12345678","body":"hi"}`, Message{}, "duplicate_field"},
		{"an unknown field given twice", `{"x":1,"to":"+12345678","body":"hi","x":2}`, Message{}, "duplicate_field"},
		{"trailing data", `{"to":"+12345678","body":"hi"} {"to":"+19012345678"}`, Message{}, "bad_json"},
		{"the zero deadline", `{"to":"+12345678","body":"hi","deadline":"0001-01-01T00:00:00Z"}`, Message{}, "bad_deadline"},
		{"the zero deadline in another zone", `{"to":"+12345678","body":"hi","deadline":"0001-01-01T09:00:00+09:00"}`, Message{}, "bad_deadline"},
		{"to with a leading 0", `{"to":"+0123456789","body":"hi"}`, Message{}, "bad_to"},
		{"NUL in the body", `{"to":"+12345678","body":"code\u0000 1"}`, Message{}, "bad_body"},
		{"escape in the body", `{"to":"+12345678","body":"\u001b[2J"}`, Message{}, "bad_body"},
		{"DEL in the body", `{"to":"+12345678","body":"a\u007f"}`, Message{}, "bad_body"},
		{"C1 control in the body", `{"to":"+12345678","body":"a\u0085"}`, Message{}, "bad_body"},
		{"resend_on_failure false", `{"to":"+12345678","body":"hi","resend_on_failure":false}`, Message{ID: "ps-1", To: "+12345678", Body: "hi"}, ""},
		{"resend_on_failure true", `{"to":"+12345678","body":"hi","resend_on_failure":true}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi"}, ""},
		{"resend_on_failure null is the default", `{"to":"+12345678","body":"hi","resend_on_failure":null}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi"}, ""},
		{"resend_on_failure not a bool", `{"to":"+12345678","body":"hi","resend_on_failure":"false"}`, Message{}, "bad_json"},
		{"tz", `{"to":"+12345678","body":"hi","tz":"Europe/Paris"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "hi", TZ: "Europe/Paris"}, ""},
		{"tz not a zone", `{"to":"+12345678","body":"hi","tz":"Paris"}`, Message{}, "bad_tz"},
		{"tz Local", `{"to":"+12345678","body":"hi","tz":"Local"}`, Message{}, "bad_tz"},
		{"resend_on_failure given twice", `{"to":"+12345678","body":"hi","resend_on_failure":true,"resend_on_failure":false}`, Message{}, "duplicate_field"},
		{"newlines and tabs are text", `{"to":"+12345678","body":"a\nb\r\n\tc"}`, Message{ID: "ps-1", ResendOnFailure: true, To: "+12345678", Body: "a\nb\r\n\tc"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.data), "ps-1")
			if tt.reason == "" {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("Decode = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var inv *InvalidError
			if !errors.As(err, &inv) || inv.Reason != tt.reason {
				t.Fatalf("Decode err = %v, want an InvalidError %s", err, tt.reason)
			}
			if strings.Contains(err.Error(), "12345678") || strings.Contains(err.Error(), "9012345678") {
				t.Fatalf("error text leaks the phone number: %v", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"id":"a","to":"+819012345678","body":"x","deadline":"2026-11-29T12:00:05Z"}`))
	f.Add([]byte(`{"to":"+12345678","body":""}`))
	f.Add([]byte(`{"to":"+12345678","body":"x","resend_on_failure":false}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, "ps")
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Decode error is not an InvalidError: %v", err)
			}
			return
		}
		if !validE164(m.To) || m.Body == "" || m.ID == "" {
			t.Fatalf("Decode accepted an invalid message: %+v", m)
		}
		// What Decode accepts, a strict reader reads the same: valid JSON
		// whose exact names give the same fields.
		var std map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(data), &std); err != nil {
			t.Fatalf("Decode accepted what encoding/json refuses (%v): %q", err, data)
		}
		if std["to"] != m.To || std["body"] != m.Body || (std["id"] != nil && std["id"] != m.ID) {
			t.Fatalf("Decode read %+v, a strict reader %v", m, std)
		}
		if rf, _ := std["resend_on_failure"].(bool); m.ResendOnFailure != (std["resend_on_failure"] == nil || rf) {
			t.Fatalf("Decode read resend_on_failure %v, a strict reader %v", m.ResendOnFailure, std["resend_on_failure"])
		}
		if m.To[1] == '0' || m.Deadline.IsZero() && std["deadline"] != nil {
			t.Fatalf("Decode accepted %+v", m)
		}
		for _, r := range m.Body {
			if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
				t.Fatalf("Decode accepted the control character U+%04X in the body", r)
			}
		}
	})
}

// TestWithID: the id and the deadline a message lacks are written first
// into its object, the rest byte for byte; what it has is kept; data that
// would not decode to them afterwards is returned as it was.
func TestWithID(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 5, 0, 500, time.UTC)
	for _, tt := range []struct {
		name, data string
		deadline   time.Time
		want       string
	}{
		{"no id", `{"to":"+819012345678","body":"hi"}`, time.Time{}, `{"id":"m1","to":"+819012345678","body":"hi"}`},
		{"no id, no deadline", ` {"to":"+819012345678", "body":"hi"}`, at,
			` {"id":"m1","deadline":"2026-11-29T12:05:00.0000005Z","to":"+819012345678", "body":"hi"}`},
		{"both kept", `{"id":"x","to":"+819012345678","body":"hi","deadline":"2026-11-29T12:00:00Z"}`, at,
			`{"id":"x","to":"+819012345678","body":"hi","deadline":"2026-11-29T12:00:00Z"}`},
		{"a null id: left as it is", `{"id":null,"to":"+819012345678","body":"hi"}`, time.Time{}, `{"id":null,"to":"+819012345678","body":"hi"}`},
		{"not a message", `{"to":"12"}`, at, `{"to":"12"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(WithID([]byte(tt.data), "m1", tt.deadline)); got != tt.want {
				t.Fatalf("WithID(%s) = %s, want %s", tt.data, got, tt.want)
			}
		})
	}
	q := `a "quoted" \ id`
	m, err := Decode(WithID([]byte(`{"to":"+819012345678","body":"hi"}`), q, time.Time{}), "")
	if err != nil || m.ID != q {
		t.Fatalf("an id that needs escaping: %+v, %v", m, err)
	}
}
