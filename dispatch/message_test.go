package dispatch

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		want   Message
		reason string // "" when valid
	}{
		{"full", `{"id":"login-7f3a9c","to":"+819012345678","body":"Your code is 482913","deadline":"2026-11-29T12:00:05Z"}`,
			Message{ID: "login-7f3a9c", To: "+819012345678", Body: "Your code is 482913", Deadline: time.Date(2026, 11, 29, 12, 0, 5, 0, time.UTC)}, ""},
		{"no id uses the pubsub id", `{"to":"+819012345678","body":"hi"}`, Message{ID: "ps-1", To: "+819012345678", Body: "hi"}, ""},
		{"unknown fields ignored", `{"to":"+12345678","body":"hi","x":[1,2]}`, Message{ID: "ps-1", To: "+12345678", Body: "hi"}, ""},
		{"body of 1600 code points", `{"to":"+12345678","body":"` + strings.Repeat("é", 1600) + `"}`, Message{ID: "ps-1", To: "+12345678", Body: strings.Repeat("é", 1600)}, ""},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.data), "ps-1")
			if tt.reason == "" {
				if err != nil || got != tt.want {
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
	})
}
