package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// asciiJSON escapes s the way a provider with ASCII-only JSON does (Python's
// json.dumps, PHP's json_encode): every non-ASCII character as \uXXXX, a
// surrogate pair above U+FFFF, and "/" as "\/". The quotes are left off.
func asciiJSON(s string) string {
	b, _ := json.Marshal(s)
	var out strings.Builder
	for _, r := range string(b[1 : len(b)-1]) {
		switch {
		case r == '/':
			out.WriteString(`\/`)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		case r >= 0x80:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteRune(r)
		}
	}
	return out.String()
}

// goJSON escapes s the way encoding/json does ("<" as \u003c, invalid UTF-8
// as \ufffd), without the quotes.
func goJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// jsonEscape matches one JSON escape: a surrogate pair is one (a high
// surrogate's escape then a low one's), any other \uXXXX alone.
var jsonEscape = regexp.MustCompile(`\\(?:["\\/bfnrt]|u(?:[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|[0-9a-fA-F]{4}))`)

// readings returns s and s with its JSON escapes decoded once, twice and
// three times (as far as that changes anything), decoded by encoding/json
// rather than by the code under test.
func readings(s string) []string {
	out := []string{s}
	for range maxUnescape {
		next := jsonEscape.ReplaceAllStringFunc(s, func(e string) string {
			var d string
			if err := json.Unmarshal([]byte(`"`+e+`"`), &d); err != nil {
				return e // cannot happen: the pattern only matches valid escapes
			}
			return d
		})
		if next == s {
			break
		}
		out = append(out, next)
		s = next
	}
	return out
}

var (
	digitGroup = regexp.MustCompile(`[0-9](?:[ ().-]{0,2}[0-9])*`)
	nonDigit   = regexp.MustCompile(`[^0-9]`)
)

// leak returns what excerpt shows of m or of the test token, read as it is
// and JSON-unescaped, or "". It looks for a run of 8 characters of the body
// (all of it if shorter), of half the token, of 4 digits of a digit group of
// the body, or of 5 of the number's digits (which the last 4 alone are not).
func leak(excerpt string, m Message) string {
	texts := map[string]int{testToken: max(8, len(testToken)/2)}
	if len(m.Body) >= minBodyLen {
		texts[m.Body] = 8
	}
	digits := map[string]int{nonDigit.ReplaceAllString(m.To, ""): 5}
	for _, g := range digitGroup.FindAllString(m.Body, -1) {
		digits[nonDigit.ReplaceAllString(g, "")] = 4
	}
	for _, s := range readings(excerpt) {
		for secret, n := range texts {
			rs := []rune(secret)
			n = min(n, len(rs))
			for i := 0; i+n <= len(rs); i++ {
				if run := string(rs[i : i+n]); strings.Contains(s, run) {
					return run
				}
			}
		}
		// An escape's hex digits are not digits of this reading.
		for _, g := range digitGroup.FindAllString(jsonEscape.ReplaceAllString(s, "_"), -1) {
			g = nonDigit.ReplaceAllString(g, "")
			for secret, n := range digits {
				for i := 0; i+n <= len(secret); i++ {
					if strings.Contains(g, secret[i:i+n]) {
						return secret[i : i+n]
					}
				}
			}
		}
	}
	return ""
}

func TestClientRedactsEchoes(t *testing.T) {
	long := strings.Repeat("Spring sale: 20% off all shoes and bags until Sunday, only at Example Store. ", 4)[:300]
	japanese := strings.Repeat("あいうえおかきくけこ", 160) // 1600 characters, 4800 bytes: past the 4 KiB read
	msg := func(body string) Message { return Message{ID: "m-1", To: testMsg.To, Body: body} }
	tests := []struct {
		name   string
		m      Message
		answer string
		want   string
	}{
		// The body, echoed.
		{name: "raw echo of a body with invalid UTF-8 (sent as U+FFFD)",
			m:      msg("Your code is 482913 \xff valid 5 min"),
			answer: "body \"Your code is 482913 \uFFFD valid 5 min\" rejected",
			want:   `body "[body]" rejected`},
		{name: `escaped \n`,
			m:      msg("Your code is 482913.\nDo not share it."),
			answer: `{"error":"body \"Your code is 482913.\nDo not share it.\" has a link"}`,
			want:   `{"error":"body \"[body]\" has a link"}`},
		{name: `escaped \"`,
			m:      msg(`Your code is "482913"`),
			answer: `{"error":"body \"Your code is \"482913\"\" refused"}`,
			want:   `{"error":"body \"[body]\" refused"}`},
		{name: `escaped \u00e9`,
			m:      msg("Code 482913 : valable 5 minutes, réservé à vous."),
			answer: `{"error":"message \"Code 482913 : valable 5 minutes, r\u00e9serv\u00e9 \u00e0 vous.\" blocked"}`,
			want:   `{"error":"message \"[body]\" blocked"}`},
		{name: `escaped \u3042`,
			m:      msg("あなたの確認コードは482913です。"),
			answer: `{"error":"invalid body: ` + asciiJSON("あなたの確認コードは482913です。") + `"}`,
			want:   `{"error":"invalid body: [body]"}`},
		{name: `escaped \/`,
			m:      msg("Your code is 482913. Open https://ex.co/v/482913 to confirm"),
			answer: `{"error":"link not allowed in \"Your code is 482913. Open https:\/\/ex.co\/v\/482913 to confirm\""}`,
			want:   `{"error":"link not allowed in \"[body]\""}`},
		{name: "escaped surrogate pair",
			m:      msg("Your key 🔑 is 482913"),
			answer: `{"error":"` + asciiJSON("Your key 🔑 is 482913") + ` is not GSM-7"}`,
			want:   `{"error":"[body] is not GSM-7"}`},
		{name: "escaped twice: the request echoed as a JSON string",
			m:      msg("Your code is 482913\nDo not share"),
			answer: `{"error":"bad request","request":"{\"to\":\"+819012345678\",\"body\":\"Your code is 482913\\nDo not share\"}"}`,
			want:   `{"error":"bad request","request":"{\"to\":\"+********5678\",\"body\":\"[body]\"}"}`},
		{name: "escaped by encoding/json",
			m:      msg("Reply <STOP> & get 482913"),
			answer: `{"error":"` + goJSON("Reply <STOP> & get 482913") + `"}`,
			want:   `{"error":"[body]"}`},

		// The body, in part.
		{name: "prefix: the first 120 of 300 characters",
			m:      msg(long),
			answer: `{"error":"content rejected","excerpt":"` + long[:120] + `"}`,
			want:   `{"error":"content rejected","excerpt":"[body]"}`},
		{name: "suffix",
			m:      msg(long),
			answer: `{"error":"content rejected","excerpt":"...` + long[250:] + `"}`,
			want:   `{"error":"content rejected","excerpt":"...[body]"}`},
		{name: "middle",
			m:      msg(long),
			answer: `{"error":"spam words near \"` + long[100:140] + `\""}`,
			want:   `{"error":"spam words near \"[body]\""}`},
		{name: "cut by the provider at 256 bytes",
			m:      msg(long),
			answer: `{"error":"too long","body":"` + long[:maxMessageLen] + `…"}`,
			want:   `{"error":"too long","body":"[body]…"}`},
		{name: "cut by the 4 KiB read",
			m:      msg(japanese),
			answer: `{"error":"body too long: ` + japanese + `"}`,
			want:   `{"error":"body too long: [body]`},
		{name: "a short run of a short body",
			m:      testMsg,
			answer: `{"error":"body 'Your code is 48...' rejected"}`,
			want:   `{"error":"body '[body]...' rejected"}`},
		{name: "the body's code alone",
			m:      testMsg,
			answer: `{"error":"code 482913 is on the blocklist"}`,
			want:   `{"error":"code ****** is on the blocklist"}`},

		// The number, in other forms.
		{name: "number with + and separators",
			m:      testMsg,
			answer: `{"error":"+81 90-1234-5678 is not a mobile number"}`,
			want:   `{"error":"+** **-****-5678 is not a mobile number"}`},
		{name: "number without +, in national form",
			m:      testMsg,
			answer: `{"error":"090-1234-5678 is not a mobile number"}`,
			want:   `{"error":"0**-****-5678 is not a mobile number"}`},
		{name: "number without country code",
			m:      testMsg,
			answer: `unknown subscriber 9012345678`,
			want:   `unknown subscriber ******5678`},
		{name: "number with + and spaces escaped",
			m:      testMsg,
			answer: `{"error":"\u002b81\u002090\u00201234\u00205678 unreachable"}`,
			want:   `{"error":"\u002b**\u0020**\u0020****\u00205678 unreachable"}`},
		{name: "number with its digits escaped",
			m:      testMsg,
			answer: `{"to":"\u0038\u0031\u0039\u0030\u0031\u0032\u0033\u0034\u0035\u0036\u0037\u0038"}`,
			want:   `{"to":"********\u0035\u0036\u0037\u0038"}`},

		// The token, in part.
		{name: "token prefix",
			m:      testMsg,
			answer: `{"error":"unknown token tok-S3CRET-01..."}`,
			want:   `{"error":"unknown token [redacted]..."}`},

		{name: "a body the placeholder would show",
			m:      msg("body"),
			answer: `{"error":"body body"}`,
			want:   withheld},

		// What an operator needs survives.
		{name: "not JSON",
			m:      testMsg,
			answer: "550 Rejected: Your code is 4829 looks like phishing\n",
			want:   "550 Rejected: [body] looks like phishing"},
		{name: "JSON error code kept",
			m:      testMsg,
			answer: `{"code":21614,"message":"To number 090-1234-5678 is not a valid mobile number","more_info":"https://www.twilio.com/docs/errors/21614","status":400}`,
			want:   `{"code":21614,"message":"To number 0**-****-5678 is not a valid mobile number","more_info":"https://www.twilio.com/docs/errors/21614","status":400}`},
		{name: "JSON error code kept with an escaped partial echo",
			m:      testMsg,
			answer: `{"error":{"code":"CONTENT_BLOCKED","message":"Body 'Your code is 4829\u2026' blocked"}}`,
			want:   `{"error":{"code":"CONTENT_BLOCKED","message":"Body '[body]\u2026' blocked"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, tt.answer)
			}))
			c := newTestClient(t, srv.URL)
			_, err := c.Send(context.Background(), tt.m)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Send = %v (%T), want *Error", err, err)
			}
			if run := leak(pe.Message, tt.m); run != "" {
				t.Errorf("Message %q shows %q", pe.Message, run)
			}
			if pe.Message != tt.want {
				t.Errorf("Message = %q, want %q", pe.Message, tt.want)
			}
		})
	}
}

// FuzzExcerpt embeds a piece of a body, raw or escaped as providers do, in
// any answer, and checks that the excerpt shows neither the body nor the
// number nor the token.
func FuzzExcerpt(f *testing.F) {
	f.Add("Your code is 482913\nDo not share it", `{"error":"bad body \"`, `\""}`, uint8(1), uint16(0), uint16(30))
	f.Add("あなたの確認コードは482913です。", `{"message":"`, `","to":"+81 90 1234 5678"}`, uint8(2), uint16(3), uint16(9))
	f.Add("Open https://ex.co/a/b 🔑 482913", `{"request":"{\"body\":\"`, `\"}"}`, uint8(3), uint16(2), uint16(40))
	f.Add("short", "x", "y", uint8(0), uint16(0), uint16(5))
	f.Fuzz(func(t *testing.T, body, pre, post string, style uint8, from, n uint16) {
		if len(body) > 8<<10 {
			t.Skip("longer than any SMS: the cost is linear in the body, and that only slows the fuzzer")
		}
		rs := []rune(body)
		i := int(from) % (len(rs) + 1)
		j := i + int(n)%(len(rs)-i+1)
		echo := string(rs[i:j])
		switch style % 4 {
		case 1:
			echo = goJSON(echo)
		case 2:
			echo = asciiJSON(echo)
		case 3:
			echo = goJSON(goJSON(echo)) // a JSON string inside a JSON string
		}
		answer := pre + echo + post
		if len(answer) > maxBodyRead {
			answer = answer[:maxBodyRead]
		}
		m := Message{ID: "f", To: testMsg.To, Body: body}
		got := excerpt([]byte(answer), m, testToken)
		if len(got) > maxMessageLen || !utf8.ValidString(got) {
			t.Errorf("excerpt = %q: longer than %d bytes or not UTF-8", got, maxMessageLen)
		}
		if run := leak(got, m); run != "" {
			t.Errorf("excerpt of %q = %q, shows %q", answer, got, run)
		}
	})
}

// TestExcerptRedactsFormEncodedEchoes: Twilio and Vonage take forms, and a
// provider may echo a field as it came, form-encoded: a secret with '+',
// '/' or '=' then reads differently from the value the adapter holds.
func TestExcerptRedactsFormEncodedEchoes(t *testing.T) {
	const secret = "s3cr+t/Key=abc&def"
	m := Message{ID: "m", To: "+819012345678", Body: "Your code: 482913 & more"}
	answer := `{"error-text":"bad request api_secret=` + url.QueryEscape(secret) + `&text=` + url.QueryEscape(m.Body) + `"}`
	got := excerpt([]byte(answer), m, secret)
	for _, leak := range []string{url.QueryEscape(secret)[:8], secret[:8], "482913", url.QueryEscape(m.Body)[:10]} {
		if strings.Contains(got, leak) {
			t.Errorf("excerpt %q shows %q", got, leak)
		}
	}
}
