package providertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"smsdispatcher/provider"
)

// vonageForm returns a valid request's form for id; edit it to make it
// invalid.
func vonageForm(id string) url.Values {
	return url.Values{
		"api_key":    {vonageTestKey},
		"api_secret": {vonageTestSecret},
		"from":       {vonageTestFrom},
		"to":         {"819012345678"},
		"text":       {"Your code is 482913"},
		"client-ref": {id},
	}
}

func vonageSimRequest(form url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/sms/json", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

func newVonageSim(cfg Config) (*Simulator, *fakeClock) {
	clock := newFakeClock(t0)
	if cfg.Token == "" {
		cfg.Token = vonageTestSecret
	}
	return NewVonage(cfg, vonageTestKey, WithClock(clock.Now)), clock
}

// vonageSimAnswer is the Simulator's JSON answer.
type vonageSimAnswer struct {
	Count    string              `json:"message-count"`
	Messages []map[string]string `json:"messages"`
}

// serveVonage runs r through s and returns the HTTP status, the answer
// and, for a 200, the first part's status.
func serveVonage(t *testing.T, s *Simulator, r *http.Request) (*httptest.ResponseRecorder, vonageSimAnswer, string) {
	t.Helper()
	w := serve(t, s, r)
	var a vonageSimAnswer
	if w.Code != http.StatusOK {
		return w, a, ""
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || len(a.Messages) == 0 {
		t.Fatalf("answer %q: %v", w.Body, err)
	}
	for k := range w.Header() {
		if strings.HasPrefix(strings.ToLower(k), "vonagesim") {
			t.Errorf("the answer has the header %q", k)
		}
	}
	return w, a, a.Messages[0]["status"]
}

func TestVonageSimulatorChecks(t *testing.T) {
	set := func(k, v string) func(url.Values) {
		return func(f url.Values) {
			if v == "-" {
				f.Del(k)
			} else {
				f.Set(k, v)
			}
		}
	}
	tests := []struct {
		name   string
		form   func(url.Values)
		req    func(*http.Request) *http.Request
		code   int    // HTTP status
		status string // Vonage's, for a 200
	}{
		{name: "valid", status: "0"},
		{name: "Basic credentials", form: func(f url.Values) { f.Del("api_key"); f.Del("api_secret") },
			req: func(r *http.Request) *http.Request { r.SetBasicAuth(vonageTestKey, vonageTestSecret); return r }, status: "0"},
		{name: "Basic with a wrong secret", form: func(f url.Values) { f.Del("api_key"); f.Del("api_secret") },
			req: func(r *http.Request) *http.Request { r.SetBasicAuth(vonageTestKey, "nope"); return r }, status: "4"},
		{name: "wrong key", form: set("api_key", "nope1234"), status: "4"},
		{name: "no key", form: set("api_key", "-"), status: "4"},
		{name: "wrong secret", form: set("api_secret", "nope"), status: "4"},
		{name: "no secret", form: set("api_secret", "-"), status: "4"},
		{name: "bad credentials before a bad body", form: func(f url.Values) { f.Set("api_secret", "nope"); f.Del("text") }, status: "4"},
		{name: "no from", form: set("from", "-"), status: "2"},
		{name: "no to", form: set("to", "-"), status: "2"},
		{name: "no text", form: set("text", "-"), status: "2"},
		{name: "empty text", form: set("text", ""), status: "2"},
		{name: "to with plus", form: set("to", "+819012345678"), status: "3"},
		{name: "to of 7 digits", form: set("to", "1234567"), status: "0"},
		{name: "to of 15 digits", form: set("to", "123456789012345"), status: "0"},
		{name: "to of 6 digits", form: set("to", "123456"), status: "3"},
		{name: "to of 16 digits", form: set("to", "1234567890123456"), status: "3"},
		{name: "to with a letter", form: set("to", "81901234567a"), status: "3"},
		{name: "emoji without type", form: set("text", "Code 👍"), status: "3"},
		{name: "emoji as unicode", form: func(f url.Values) { f.Set("text", "Code 👍"); f.Set("type", "unicode") }, status: "0"},
		{name: "Japanese without type", form: set("text", "認証コード"), status: "3"},
		{name: "small c cedilla as text", form: func(f url.Values) { f.Set("text", "Reçu"); f.Set("type", "text") }, status: "3"},
		{name: "euro sign without type", form: set("text", "5€"), status: "0"},
		{name: "ASCII as text", form: set("type", "text"), status: "0"},
		{name: "ASCII as unicode", form: set("type", "unicode"), status: "0"},
		{name: "binary", form: set("type", "binary"), status: "3"},
		{name: "client-ref of 100", form: set("client-ref", strings.Repeat("r", 100)), status: "0"},
		{name: "client-ref of 101", form: set("client-ref", strings.Repeat("r", 101)), status: "3"},
		{name: "no client-ref", form: set("client-ref", "-"), status: "0"},
		{name: "ttl minimum", form: set("ttl", "20000"), status: "0"},
		{name: "ttl maximum", form: set("ttl", "604800000"), status: "0"},
		{name: "ttl too short", form: set("ttl", "19999"), status: "3"},
		{name: "ttl too long", form: set("ttl", "604800001"), status: "3"},
		{name: "ttl not a number", form: set("ttl", "1m"), status: "3"},
		{name: "JSON body", req: func(r *http.Request) *http.Request {
			n := httptest.NewRequest(http.MethodPost, "/sms/json", strings.NewReader(`{"api_key":"`+vonageTestKey+`","api_secret":"`+vonageTestSecret+`"}`))
			n.Header.Set("Content-Type", "application/json")
			return n
		}, status: "4"},
		{name: "JSON body with Basic", req: func(r *http.Request) *http.Request {
			n := httptest.NewRequest(http.MethodPost, "/sms/json", strings.NewReader(`{"to":"819012345678"}`))
			n.Header.Set("Content-Type", "application/json")
			n.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(vonageTestKey+":"+vonageTestSecret)))
			return n
		}, status: "2"},
		{name: "GET", req: func(r *http.Request) *http.Request { r.Method = http.MethodGet; return r }, code: 405},
		{name: "XML format", req: func(r *http.Request) *http.Request { r.URL.Path = "/sms/xml"; return r }, code: 404},
		{name: "root", req: func(r *http.Request) *http.Request { r.URL.Path = "/"; return r }, code: 404},
		{name: "too big", form: set("text", strings.Repeat("x", maxRequestBody)), code: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newVonageSim(Config{})
			form := vonageForm("v-1")
			if tt.form != nil {
				tt.form(form)
			}
			r := vonageSimRequest(form)
			if tt.req != nil {
				r = tt.req(r)
			}
			w, _, status := serveVonage(t, s, r)
			code := tt.code
			if code == 0 {
				code = http.StatusOK
			}
			if w.Code != code || status != tt.status {
				t.Fatalf("HTTP %d status %q, want HTTP %d status %q (%s)", w.Code, status, code, tt.status, w.Body)
			}
			st := s.Stats()
			if status == "0" {
				if st.Accepted != 1 {
					t.Errorf("stats %+v; want 1 accepted", st)
				}
			} else if st.Rejected != 1 || st.Accepted != 0 || (status == "4") != (st.Unauthorized == 1) {
				t.Errorf("stats %+v; want 1 rejected", st)
			}
			if w.Code == 405 && w.Header().Get("Allow") != http.MethodPost {
				t.Errorf("405 without Allow: POST")
			}
			if status != "0" && strings.Contains(w.Body.String(), "819012345678") {
				t.Errorf("the answer %q echoes the number", w.Body)
			}
		})
	}
}

func TestVonageSimulatorAccepted(t *testing.T) {
	long := strings.Repeat("x", 200) // 2 parts of GSM-7
	wide := strings.Repeat("x", 71)  // 2 parts as unicode, 1 as text
	emoji := strings.Repeat("👍", 36) // 72 code units: 2 parts
	tests := []struct {
		name  string
		form  func(url.Values)
		parts int
		ref   bool
	}{
		{name: "one part", form: func(url.Values) {}, parts: 1, ref: true},
		{name: "two parts", form: func(f url.Values) { f.Set("text", long) }, parts: 2, ref: true},
		{name: "unicode counts in UCS-2", form: func(f url.Values) { f.Set("text", wide); f.Set("type", "unicode") }, parts: 2, ref: true},
		{name: "text counts in GSM-7", form: func(f url.Values) { f.Set("text", wide) }, parts: 1, ref: true},
		{name: "emoji", form: func(f url.Values) { f.Set("text", emoji); f.Set("type", "unicode") }, parts: 2, ref: true},
		{name: "no client-ref", form: func(f url.Values) { f.Del("client-ref") }, parts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newVonageSim(Config{})
			form := vonageForm("acc-1")
			tt.form(form)
			_, a, status := serveVonage(t, s, vonageSimRequest(form))
			if status != "0" || a.Count != string(rune('0'+tt.parts)) || len(a.Messages) != tt.parts {
				t.Fatalf("answer %+v; want %d parts", a, tt.parts)
			}
			ids := map[string]bool{}
			for i, p := range a.Messages {
				id := p["message-id"]
				if !strings.HasPrefix(id, "0A00000000000001") || ids[id] {
					t.Errorf("part %d: message-id %q", i, id)
				}
				ids[id] = true
				for _, k := range []string{"remaining-balance", "message-price", "network"} {
					if p[k] == "" {
						t.Errorf("part %d has no %s: %v", i, k, p)
					}
				}
				if p["to"] != "819012345678" || p["status"] != "0" {
					t.Errorf("part %d: %v", i, p)
				}
				if ref, ok := p["client-ref"]; ok != tt.ref || (ok && ref != "acc-1") {
					t.Errorf("part %d: client-ref %q (%v), want it %v", i, ref, ok, tt.ref)
				}
			}
			if st := s.Stats(); st.Accepted != 1 || st.AcceptedSegments != tt.parts {
				t.Errorf("stats %+v; want 1 accepted of %d segments", st, tt.parts)
			}
		})
	}
}

// TestVonageSimulatorRate checks that the rate counts segments and that a
// throttle is a 200 with status 1 and no Retry-After.
func TestVonageSimulatorRate(t *testing.T) {
	s, clock := newVonageSim(Config{Limit: 3, CountSegments: true})
	three := vonageForm("three")
	three.Set("text", strings.Repeat("x", 400)) // 3 parts
	four := vonageForm("four")
	four.Set("text", strings.Repeat("x", 500)) // 4 parts: over any window
	steps := []struct {
		at     time.Duration
		form   url.Values
		status string
	}{
		{0, three, "0"},
		{0, vonageForm("one"), "1"},
		{999 * time.Millisecond, vonageForm("one"), "1"},
		{time.Second, vonageForm("one"), "0"},
		{time.Second, vonageForm("two"), "0"},
		{time.Second, vonageForm("again"), "0"},
		{time.Second, vonageForm("over"), "1"},
		{10 * time.Second, four, "1"},
	}
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		w, a, status := serveVonage(t, s, vonageSimRequest(st.form))
		if w.Code != 200 || status != st.status {
			t.Errorf("step %d: HTTP %d status %q, want 200 %q", i, w.Code, status, st.status)
		}
		if status == "1" {
			if w.Header().Get("Retry-After") != "" || a.Messages[0]["error-text"] != "Throttled" {
				t.Errorf("step %d: throttle %v with Retry-After %q", i, a, w.Header().Get("Retry-After"))
			}
		}
	}
	st := s.Stats()
	if st.Accepted != 4 || st.AcceptedSegments != 6 || st.Throttled != 4 || st.MaxInWindow != 3 {
		t.Errorf("stats %+v", st)
	}
	if got := s.Arrivals()[0]; got.ID != "three" || got.Segments != 3 || got.Outcome != "accepted" {
		t.Errorf("first arrival %+v", got)
	}
	if s.SentCount("one") != 1 || s.SentCount("four") != 0 {
		t.Errorf("SentCount(one) = %d, SentCount(four) = %d", s.SentCount("one"), s.SentCount("four"))
	}
}

// TestVonageSimulatorSenderLimit checks that a sender (from) over its
// limit gets Vonage's throttle, a 200 with status 1, while another sender
// still passes, and that parts count per sender with CountSegments.
func TestVonageSimulatorSenderLimit(t *testing.T) {
	s, clock := newVonageSim(Config{CountSegments: true, SenderLimit: 2})
	form := func(id, from string, parts int) url.Values {
		f := vonageForm(id)
		f.Set("from", from)
		f.Set("text", strings.Repeat("x", 153*parts)) // 153 septets a part beyond one
		return f
	}
	steps := []struct {
		at     time.Duration
		form   url.Values
		status string
	}{
		{0, form("a1", "AcmeInc", 2), "0"},
		{0, form("a2", "AcmeInc", 1), "1"},
		{0, form("b1", "12025550101", 1), "0"},
		{0, form("b2", "12025550101", 1), "0"},
		{0, form("b3", "12025550101", 1), "1"},
		{time.Second, form("a3", "AcmeInc", 1), "0"},
	}
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		w, a, status := serveVonage(t, s, vonageSimRequest(st.form))
		if w.Code != 200 || status != st.status {
			t.Errorf("step %d: HTTP %d status %q, want 200 %q", i, w.Code, status, st.status)
		}
		if status == "1" && (w.Header().Get("Retry-After") != "" || a.Messages[0]["error-text"] != "Throttled") {
			t.Errorf("step %d: throttle %v with Retry-After %q", i, a, w.Header().Get("Retry-After"))
		}
	}
	if st := s.Stats(); st.Accepted != 4 || st.AcceptedSegments != 5 || st.SenderThrottled != 2 || st.Throttled != 0 {
		t.Errorf("stats %+v", st)
	}
	if a := s.Arrivals()[1]; a.ID != "a2" || a.From != "AcmeInc" || a.Outcome != "throttled" {
		t.Errorf("arrival %+v, want a2 from AcmeInc throttled", a)
	}
}

func TestVonageSimulatorFaults(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(*Simulator)
		code   int
		status string
		header string // Retry-After
	}{
		{name: "ThrottleNext", setup: func(s *Simulator) { s.ThrottleNext(1, 5*time.Second) }, code: 200, status: "1"},
		{name: "FailFor 500", setup: func(s *Simulator) { s.FailFor(500, time.Minute) }, code: 200, status: "5"},
		{name: "FailFor 503", setup: func(s *Simulator) { s.FailFor(503, time.Minute) }, code: 503},
		{name: "FailFor 429", setup: func(s *Simulator) { s.FailFor(429, time.Minute) }, code: 429, header: "1"},
		{name: "RefuseNumber", setup: func(s *Simulator) { s.RefuseNumber("+819012345678") }, code: 200, status: "29"},
		{name: "RefuseNumber another", setup: func(s *Simulator) { s.RefuseNumber("+819099999999") }, code: 200, status: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newVonageSim(Config{})
			tt.setup(s)
			w, _, status := serveVonage(t, s, vonageSimRequest(vonageForm("f-1")))
			if w.Code != tt.code || status != tt.status || w.Header().Get("Retry-After") != tt.header {
				t.Errorf("HTTP %d status %q Retry-After %q, want %d %q %q (%s)", w.Code, status, w.Header().Get("Retry-After"), tt.code, tt.status, tt.header, w.Body)
			}
		})
	}
}

func TestVonageSimulatorSuspension(t *testing.T) {
	s, clock := newVonageSim(Config{Limit: 1, SuspendAfter: 1, SuspendFor: time.Minute})
	for i, want := range []string{"0", "1", "1", "8", "8"} {
		_, a, status := serveVonage(t, s, vonageSimRequest(vonageForm("s")))
		if status != want {
			t.Errorf("request %d: status %q, want %q", i, status, want)
		}
		if want == "8" && a.Messages[0]["error-text"] != "Partner Account Barred" {
			t.Errorf("request %d: %v", i, a.Messages[0])
		}
	}
	clock.Set(t0.Add(time.Minute))
	if _, _, status := serveVonage(t, s, vonageSimRequest(vonageForm("s"))); status != "0" {
		t.Errorf("after the suspension: status %q, want 0", status)
	}
	if st := s.Stats(); st.Suspensions != 1 || st.SuspendedAnswers != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestVonageSimulatorSetToken(t *testing.T) {
	s, _ := newVonageSim(Config{})
	const rotated = "rotated-S3CRET-42"
	if _, _, status := serveVonage(t, s, vonageSimRequest(vonageForm("a"))); status != "0" {
		t.Fatalf("status %q before SetToken", status)
	}
	s.SetToken(rotated)
	_, a, status := serveVonage(t, s, vonageSimRequest(vonageForm("b")))
	if status != "4" || a.Messages[0]["error-text"] != "Bad Credentials" {
		t.Errorf("the old secret: %v, want status 4", a)
	}
	form := vonageForm("c")
	form.Set("api_secret", rotated)
	if _, _, status := serveVonage(t, s, vonageSimRequest(form)); status != "0" {
		t.Errorf("the new secret: status %q", status)
	}
	if st := s.Stats(); st.Unauthorized != 1 || st.Accepted != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestVonageAgainstSimulator runs the adapter against the simulator.
func TestVonageAgainstSimulator(t *testing.T) {
	sim, clock := newVonageSim(Config{Limit: 4, CountSegments: true, SuspendAfter: -1})
	srv := newServer(t, sim)
	v := newTestVonage(t, srv.URL, nil, provider.WithClock(clock.Now))
	send := func(m provider.Message) (provider.Receipt, *provider.Error) {
		t.Helper()
		rc, err := v.Send(context.Background(), m)
		var e *provider.Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("Send: %v", err)
		}
		return rc, e
	}
	msg := func(id, body string) provider.Message {
		return provider.Message{ID: id, To: "+819012345678", Body: body}
	}

	if rc, e := send(msg("a", "Your code is 482913")); e != nil || rc.ID != "0A000000000000011" {
		t.Errorf("accepted: %+v, %v", rc, e)
	}
	long := provider.Message{ID: strings.Repeat("L", 128), To: "+819012345678", Body: "認証コード 482913 👍", Deadline: t0.Add(time.Minute)}
	if rc, e := send(long); e != nil || rc.ID != "0A000000000000021" {
		t.Errorf("unicode, long ID, deadline: %+v, %v", rc, e)
	}
	if n := sim.SentCount(long.ID[:100]); n != 1 {
		t.Errorf("SentCount(client-ref) = %d", n)
	}
	if _, e := send(msg("b", strings.Repeat("x", 200))); e != nil {
		t.Errorf("two parts: %v", e)
	}
	// 4 segments now in the window.
	if _, e := send(msg("c", "x")); e == nil || !e.Throttled() || e.Status != 200 || e.Code != "1" || e.RetryAfter != time.Second {
		t.Errorf("over the limit: %+v, want a throttle in a 200", e)
	}
	clock.Set(t0.Add(time.Second))
	sim.RefuseNumber("+819012345678")
	if _, e := send(msg("d", "x")); e == nil || !e.Permanent() || e.Code != "29" {
		t.Errorf("refused number: %+v", e)
	}
	if _, e := send(provider.Message{ID: "e", To: "+819012345679", Body: "x"}); e != nil {
		t.Errorf("another number: %v", e)
	}
	sim.FailFor(500, time.Second)
	if _, e := send(provider.Message{ID: "f", To: "+819012345679", Body: "x"}); e == nil || !e.Temporary() || e.Code != "5" {
		t.Errorf("FailFor(500): %+v", e)
	}
	sim.FailFor(0, 0)
	wrong := newTestVonage(t, srv.URL, provider.StaticSecret("wrong-S3CRET-0000"))
	if _, err := wrong.Send(context.Background(), provider.Message{ID: "g", To: "+819012345679", Body: "x"}); !isVonageCode(err, provider.KindAccount, "4") {
		t.Errorf("wrong secret: %v", err)
	}
	if st := sim.Stats(); st.Accepted != 4 || st.Unauthorized != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestVonageAgainstSuspendedSimulator checks that a suspension reads as an
// account failure.
func TestVonageAgainstSuspendedSimulator(t *testing.T) {
	sim, _ := newVonageSim(Config{Limit: 1, SuspendAfter: 1})
	srv := newServer(t, sim)
	v := newTestVonage(t, srv.URL, nil)
	var last error
	for i := range 4 {
		_, last = v.Send(context.Background(), provider.Message{ID: "s", To: "+819012345678", Body: "x" + strings.Repeat("y", i)})
	}
	if !isVonageCode(last, provider.KindAccount, "8") {
		t.Errorf("suspended: %v, want an account failure, code 8", last)
	}
}

func isVonageCode(err error, kind provider.Kind, code string) bool {
	var e *provider.Error
	return errors.As(err, &e) && e.Meaning() == kind && e.Code == code && e.Status == 200
}
