package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"smsdispatcher/provider"
)

const twilioMessagesPath = "/2010-04-01/Accounts/" + testTwilioSID + "/Messages.json"

// twilioForm is a valid create for twMsg from testTwilioFrom.
func twilioForm() url.Values {
	return url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}}
}

// twilioSimRequest builds a create of form with testToken.
func twilioSimRequest(form url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, twilioMessagesPath, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth(testTwilioSID, testToken)
	return r
}

func newTwilioSim(cfg Config) (*Simulator, *fakeClock) {
	clock := newFakeClock(t0)
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	return NewTwilio(cfg, testTwilioSID, WithClock(clock.Now)), clock
}

// twilioErrorBody is Twilio's error JSON as the simulator writes it.
type twilioErrorBody struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

// checkTwilioError checks that w is status with Twilio's error JSON for
// code (0: no code).
func checkTwilioError(t *testing.T, w *httptest.ResponseRecorder, status, code int) {
	t.Helper()
	if w.Code != status {
		t.Errorf("status %d, want %d (%s)", w.Code, status, strings.TrimSpace(w.Body.String()))
	}
	var e twilioErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	wantInfo := ""
	if code != 0 {
		wantInfo = "https://www.twilio.com/docs/errors/" + strconv.Itoa(code)
	}
	if e.Code != code || e.Status != status || e.MoreInfo != wantInfo || e.Message == "" {
		t.Errorf("body %+v, want code %d, status %d, more_info %q and a message", e, code, status, wantInfo)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestTwilioSimulatorChecks(t *testing.T) {
	form := func(edit func(url.Values)) url.Values {
		f := twilioForm()
		edit(f)
		return f
	}
	withForm := func(edit func(url.Values)) func() *http.Request {
		return func() *http.Request { return twilioSimRequest(form(edit)) }
	}
	emoji := strings.Repeat("😀", 801) // 1602 UTF-16 code units
	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		code   int               // Twilio code of an error
		header map[string]string // headers the answer must have
	}{
		{name: "valid", req: withForm(func(url.Values) {}), status: 201},
		{name: "path of no resource", status: 404, code: 20404, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.URL.Path = "/2010-04-01/Accounts/" + testTwilioSID + "/SMS/Messages.json"
			return r
		}},
		{name: "path without the version", status: 404, code: 20404, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.URL.Path = "/Accounts/" + testTwilioSID + "/Messages.json"
			return r
		}},
		{name: "GET", status: 405, code: 20004, header: map[string]string{"Allow": "POST"}, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.Method = http.MethodGet
			return r
		}},
		{name: "another account's path", status: 401, code: 20003, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.URL.Path = "/2010-04-01/Accounts/AC99999999999999999999999999999999/Messages.json"
			return r
		}},
		{name: "no credential", status: 401, code: 20003, header: map[string]string{"WWW-Authenticate": `Basic realm="Twilio API"`},
			req: func() *http.Request {
				r := twilioSimRequest(twilioForm())
				r.Header.Del("Authorization")
				return r
			}},
		{name: "wrong token", status: 401, code: 20003, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.SetBasicAuth(testTwilioSID, "nope")
			return r
		}},
		{name: "wrong user", status: 401, code: 20003, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.SetBasicAuth("AC99999999999999999999999999999999", testToken)
			return r
		}},
		{name: "bearer instead of Basic", status: 401, code: 20003, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.Header.Set("Authorization", "Bearer "+testToken)
			return r
		}},
		{name: "JSON reads as no To", status: 400, code: 21604, req: func() *http.Request {
			r := twilioSimRequest(twilioForm())
			r.Body = http.NoBody
			r2 := httptest.NewRequest(http.MethodPost, twilioMessagesPath,
				strings.NewReader(`{"To":"+819087654321","Body":"hi","From":"+15005550006"}`))
			r2.Header = r.Header
			r2.Header.Set("Content-Type", "application/json")
			return r2
		}},
		{name: "no To", status: 400, code: 21604, req: withForm(func(f url.Values) { f.Del("To") })},
		{name: "To not E.164", status: 400, code: 21211, req: withForm(func(f url.Values) { f.Set("To", "09087654321") })},
		{name: "To too short", status: 400, code: 21211, req: withForm(func(f url.Values) { f.Set("To", "+8190") })},
		{name: "neither From nor MessagingServiceSid", status: 400, code: 21603, req: withForm(func(f url.Values) { f.Del("From") })},
		{name: "no Body", status: 400, code: 21602, req: withForm(func(f url.Values) { f.Del("Body") })},
		{name: "empty Body", status: 400, code: 21602, req: withForm(func(f url.Values) { f.Set("Body", "") })},
		{name: "Body of 1600 characters", status: 201, req: withForm(func(f url.Values) { f.Set("Body", strings.Repeat("a", 1600)) })},
		{name: "Body of 1601 characters", status: 400, code: 21617, req: withForm(func(f url.Values) { f.Set("Body", strings.Repeat("a", 1601)) })},
		{name: "801 emoji are 1602 characters", status: 400, code: 21617, req: withForm(func(f url.Values) { f.Set("Body", emoji) })},
		{name: "ValidityPeriod 1", status: 201, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "1") })},
		{name: "ValidityPeriod 36000", status: 201, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "36000") })},
		{name: "ValidityPeriod 0", status: 400, code: 21624, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "0") })},
		{name: "ValidityPeriod 36001", status: 400, code: 21624, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "36001") })},
		{name: "ValidityPeriod 1.5", status: 400, code: 21624, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "1.5") })},
		{name: "ValidityPeriod -5", status: 400, code: 21624, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "-5") })},
		{name: "ValidityPeriod empty", status: 400, code: 21624, req: withForm(func(f url.Values) { f.Set("ValidityPeriod", "") })},
		{name: "body over 64 KiB", status: 413, req: withForm(func(f url.Values) { f.Set("Padding", strings.Repeat("x", 64<<10)) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTwilioSim(Config{})
			w := serve(t, s, tt.req())
			if tt.status == 201 {
				if w.Code != 201 {
					t.Fatalf("status %d, want 201 (%s)", w.Code, strings.TrimSpace(w.Body.String()))
				}
			} else {
				checkTwilioError(t, w, tt.status, tt.code)
			}
			for k, v := range tt.header {
				if got := w.Header().Get(k); got != v {
					t.Errorf("header %s %q, want %q", k, got, v)
				}
			}
		})
	}
}

// twilioResource decodes a 201's Message resource.
func twilioResource(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if w.Code != http.StatusCreated {
		t.Fatalf("status %d, want 201 (%s)", w.Code, strings.TrimSpace(w.Body.String()))
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return m
}

func TestTwilioSimulatorMessageResource(t *testing.T) {
	s, _ := newTwilioSim(Config{})
	sid := regexp.MustCompile(`^SM[0-9a-f]{32}$`)
	long := strings.Repeat("a", 200) // 2 segments

	f := twilioForm()
	f.Set("Body", long)
	m := twilioResource(t, serve(t, s, twilioSimRequest(f)))
	want := map[string]any{
		"account_sid": testTwilioSID, "to": twMsg.To, "from": testTwilioFrom, "messaging_service_sid": nil,
		"body": long, "status": "queued", "num_segments": "2", "num_media": "0", "direction": "outbound-api",
		"api_version": "2010-04-01", "price": nil, "error_code": nil, "error_message": nil, "date_sent": nil,
		"date_created": "Sun, 29 Nov 2026 12:00:00 +0000",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	id, _ := m["sid"].(string)
	if !sid.MatchString(id) {
		t.Errorf("sid %q, want SM and 32 hex digits", id)
	}
	if m["uri"] != "/2010-04-01/Accounts/"+testTwilioSID+"/Messages/"+id+".json" {
		t.Errorf("uri %v", m["uri"])
	}

	// With a Messaging Service, Twilio has picked no sender yet.
	f = twilioForm()
	f.Del("From")
	f.Set("MessagingServiceSid", testTwilioMG)
	m = twilioResource(t, serve(t, s, twilioSimRequest(f)))
	for k, v := range map[string]any{"from": nil, "messaging_service_sid": testTwilioMG, "status": "accepted", "num_segments": "0"} {
		if m[k] != v {
			t.Errorf("service: %s = %#v, want %#v", k, m[k], v)
		}
	}
	if m["sid"] == id {
		t.Errorf("two messages share the sid %v", id)
	}

	// Both, as Twilio documents, are accepted.
	f.Set("From", testTwilioFrom)
	m = twilioResource(t, serve(t, s, twilioSimRequest(f)))
	if m["from"] != testTwilioFrom || m["messaging_service_sid"] != testTwilioMG {
		t.Errorf("both: from %v, messaging_service_sid %v", m["from"], m["messaging_service_sid"])
	}

	// No client reference: the arrivals have no ID and SentCount("")
	// counts every acceptance.
	for _, a := range s.Arrivals() {
		if a.ID != "" || a.Outcome != "accepted" {
			t.Errorf("arrival %+v, want no ID, accepted", a)
		}
	}
	if n := s.SentCount(""); n != 3 {
		t.Errorf(`SentCount("") = %d, want 3`, n)
	}
}

func TestTwilioSimulatorRateInSegments(t *testing.T) {
	s, clock := newTwilioSim(Config{Limit: 3, CountSegments: true, RetryAfter: 1500 * time.Millisecond})
	two := twilioForm()
	two.Set("Body", strings.Repeat("a", 200)) // 2 segments
	steps := []struct {
		at     time.Duration
		form   url.Values
		status int
	}{
		{0, two, 201},
		{100 * time.Millisecond, two, 429}, // 2+2 > 3
		{200 * time.Millisecond, twilioForm(), 201},
		{300 * time.Millisecond, twilioForm(), 429},
		{time.Second, two, 201}, // the first two slid out
	}
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		w := serve(t, s, twilioSimRequest(st.form))
		if st.status == 429 {
			checkTwilioError(t, w, 429, 20429)
			if ra := w.Header().Get("Retry-After"); ra != "1.5" {
				t.Errorf("step %d: Retry-After %q, want 1.5", i, ra)
			}
		} else if w.Code != st.status {
			t.Errorf("step %d: status %d, want %d", i, w.Code, st.status)
		}
	}
	if st := s.Stats(); st.Accepted != 3 || st.AcceptedSegments != 5 || st.Throttled != 2 {
		t.Errorf("stats %+v, want 3 accepted of 5 segments, 2 throttled", st)
	}
}

// TestTwilioSimulatorSenderLimitInSegments checks that with CountSegments
// each sender (From) has its own window of segments, answered over it as
// the account's rate is, and that a Messaging Service without From counts
// under the sender "".
func TestTwilioSimulatorSenderLimitInSegments(t *testing.T) {
	const a, b = "+12025550101", "+18885550100"
	s, clock := newTwilioSim(Config{CountSegments: true, SenderLimit: 3, RetryAfter: 1500 * time.Millisecond})
	form := func(from string, segments int) url.Values {
		f := twilioForm()
		f.Set("Body", strings.Repeat("a", 153*segments)) // 153 septets a segment beyond one
		if from == "" {
			f.Del("From")
			f.Set("MessagingServiceSid", testTwilioMG)
		} else {
			f.Set("From", from)
		}
		return f
	}
	steps := []struct {
		at       time.Duration
		from     string
		segments int
		status   int
	}{
		{0, a, 2, 201},
		{0, a, 2, 429}, // 2+2 > 3
		{0, a, 1, 201}, // 3
		{0, b, 3, 201}, // b's own 3
		{0, "", 2, 201},
		{0, "", 2, 429},
		{500 * time.Millisecond, b, 1, 429},
		{999 * time.Millisecond, a, 1, 429},
		{time.Second, a, 3, 201}, // a's first 3 slid out
		{time.Second, b, 4, 429}, // more than SenderLimit: never
	}
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		w := serve(t, s, twilioSimRequest(form(st.from, st.segments)))
		if st.status == 429 {
			checkTwilioError(t, w, 429, 20429)
			if ra := w.Header().Get("Retry-After"); ra != "1.5" {
				t.Errorf("step %d: Retry-After %q, want 1.5", i, ra)
			}
		} else if w.Code != st.status {
			t.Errorf("step %d (from %q, %d segments): status %d, want %d", i, st.from, st.segments, w.Code, st.status)
		}
	}
	st := s.Stats()
	if st.Accepted != 5 || st.AcceptedSegments != 11 || st.SenderThrottled != 5 || st.Throttled != 0 || st.SenderMaxInWindow != 3 {
		t.Errorf("stats %+v, want 5 accepted of 11 segments, 5 throttled for their sender, at most 3 a window", st)
	}
	if most, who := s.MaxInWindow(time.Second, true); most != 3 || who != a {
		t.Errorf("MaxInWindow(1s, by sender) = %d, %q; want 3, %q (the least of a and b, both at 3)", most, who, a)
	}
	if most, _ := s.MaxInWindow(time.Second, false); most != 8 {
		t.Errorf("MaxInWindow(1s, account) = %d segments, want 8", most)
	}
}

func TestTwilioSimulatorSuspension(t *testing.T) {
	s, clock := newTwilioSim(Config{Limit: 1, SuspendAfter: 1, SuspendFor: time.Minute})
	serve(t, s, twilioSimRequest(twilioForm()))
	serve(t, s, twilioSimRequest(twilioForm())) // 429
	serve(t, s, twilioSimRequest(twilioForm())) // 429: more than 1, suspended
	clock.Set(t0.Add(10 * time.Second))
	w := serve(t, s, twilioSimRequest(twilioForm()))
	checkTwilioError(t, w, http.StatusForbidden, 20403)
	if ra := w.Header().Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on a suspended account, want none", ra)
	}
	if st := s.Stats(); !st.Suspended || st.SuspendedAnswers != 1 {
		t.Errorf("stats %+v, want suspended with 1 answer", st)
	}
	clock.Set(t0.Add(time.Minute + time.Second))
	if w := serve(t, s, twilioSimRequest(twilioForm())); w.Code != 201 {
		t.Errorf("after the suspension: status %d, want 201", w.Code)
	}
}

func TestTwilioSimulatorSetToken(t *testing.T) {
	s, _ := newTwilioSim(Config{})
	if w := serve(t, s, twilioSimRequest(twilioForm())); w.Code != 201 {
		t.Fatalf("status %d, want 201", w.Code)
	}
	s.SetToken("rotated-0123456789")
	checkTwilioError(t, serve(t, s, twilioSimRequest(twilioForm())), 401, 20003)
	r := twilioSimRequest(twilioForm())
	r.SetBasicAuth(testTwilioSID, "rotated-0123456789")
	if w := serve(t, s, r); w.Code != 201 {
		t.Errorf("new token: status %d, want 201", w.Code)
	}
	if st := s.Stats(); st.Unauthorized != 1 {
		t.Errorf("stats %+v, want 1 unauthorized", st)
	}
}

func TestTwilioSimulatorRefuseNumber(t *testing.T) {
	s, _ := newTwilioSim(Config{})
	s.RefuseNumber(twMsg.To)
	checkTwilioError(t, serve(t, s, twilioSimRequest(twilioForm())), 400, 21211)
	f := twilioForm()
	f.Set("To", "+819011112222")
	if w := serve(t, s, twilioSimRequest(f)); w.Code != 201 {
		t.Errorf("another number: status %d, want 201", w.Code)
	}
}

func TestTwilioSimulatorFaults(t *testing.T) {
	s, clock := newTwilioSim(Config{RetryAfter: 2 * time.Second})
	s.FailFor(503, time.Second)
	checkTwilioError(t, serve(t, s, twilioSimRequest(twilioForm())), 503, 20500)
	s.FailFor(429, time.Second)
	w := serve(t, s, twilioSimRequest(twilioForm()))
	checkTwilioError(t, w, 429, 20429)
	if ra := w.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("FailFor(429): Retry-After %q, want 2", ra)
	}
	clock.Set(t0.Add(2 * time.Second))
	s.ThrottleNext(1, -1)
	w = serve(t, s, twilioSimRequest(twilioForm()))
	checkTwilioError(t, w, 429, 20429)
	if _, ok := w.Header()["Retry-After"]; ok {
		t.Errorf("ThrottleNext(1, -1): a Retry-After header")
	}
	if w := serve(t, s, twilioSimRequest(twilioForm())); w.Code != 201 {
		t.Errorf("after the faults: status %d, want 201", w.Code)
	}
}

// TestTwilioAgainstSimulator runs the adapter against the simulator.
func TestTwilioAgainstSimulator(t *testing.T) {
	sim, clock := newTwilioSim(Config{Limit: 2, CountSegments: true})
	srv := newServer(t, sim)
	tw := newTestTwilio(t, srv.URL, nil, provider.WithClock(clock.Now))
	ctx := context.Background()

	m := twMsg
	m.Deadline = t0.Add(5 * time.Minute)
	rc, err := tw.Send(ctx, m)
	if err != nil || rc.ID != (&twilioDialect{}).messageID(1) {
		t.Fatalf("Send = %+v, %v; want accepted as the first sid", rc, err)
	}

	_, err = tw.Send(ctx, twMsg)
	if err != nil {
		t.Fatalf("second Send = %v", err)
	}
	_, err = tw.Send(ctx, twMsg)
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.Throttled() || pe.Code != "20429" || pe.RetryAfter != time.Second {
		t.Fatalf("Send over the limit = %v, want throttled 20429 for 1s", err)
	}

	clock.Set(t0.Add(2 * time.Second))
	sim.RefuseNumber(twMsg.To)
	_, err = tw.Send(ctx, twMsg)
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.Permanent() || pe.Code != "21211" {
		t.Fatalf("Send to a refused number = %v, want refused 21211", err)
	}
	checkNoSecrets(t, err, twMsg)

	other := newTestTwilio(t, srv.URL, func(c *provider.TwilioConfig) { c.AuthToken = provider.StaticSecret("wrong-0123456789") })
	_, err = other.Send(ctx, provider.Message{ID: "x", To: "+819011112222", Body: "hello"})
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.AccountFailure() || pe.Code != "20003" {
		t.Fatalf("Send with a wrong token = %v, want an account failure 20003", err)
	}

	wrongPath := newTestTwilio(t, srv.URL+"/twilio", nil)
	if _, err := wrongPath.Send(ctx, provider.Message{ID: "x", To: "+819011112222", Body: "hello"}); !isKind(err, provider.KindAccount) {
		t.Fatalf("Send to a wrong base URL = %v, want an account failure", err)
	}

	svc := newTestTwilio(t, srv.URL, func(c *provider.TwilioConfig) { c.From, c.MessagingServiceSID = "", testTwilioMG }, provider.WithClock(clock.Now))
	if rc, err := svc.Send(ctx, provider.Message{ID: "y", To: "+819011112222", Body: "hello"}); err != nil || rc.ID == "" {
		t.Fatalf("Send through a messaging service = %+v, %v; want accepted", rc, err)
	}

	if st := sim.Stats(); st.Accepted != 3 || st.Throttled != 1 || st.Unauthorized != 1 {
		t.Errorf("simulator stats %+v", st)
	}
}

// TestTwilioAgainstSimulatorLongBody checks that the Receipt has the sid
// of an answer longer than what Send reads: the sid comes first.
func TestTwilioAgainstSimulatorLongBody(t *testing.T) {
	sim, _ := newTwilioSim(Config{})
	srv := newServer(t, sim)
	tw := newTestTwilio(t, srv.URL, nil)
	long := twMsg
	long.Body = strings.Repeat("あ", 1600) // 4,800 bytes, echoed in the 201
	rc, err := tw.Send(context.Background(), long)
	if err != nil || rc.ID != (&twilioDialect{}).messageID(1) {
		t.Fatalf("Send = %+v, %v; want accepted with the first sid", rc, err)
	}
}

// TestTwilioAgainstSuspendedSimulator checks that a suspension reads as an
// account failure, as Twilio's answer for a suspended account does.
func TestTwilioAgainstSuspendedSimulator(t *testing.T) {
	sim, _ := newTwilioSim(Config{Limit: 1, SuspendAfter: 1})
	srv := newServer(t, sim)
	tw := newTestTwilio(t, srv.URL, nil)
	ctx := context.Background()
	tw.Send(ctx, twMsg)
	tw.Send(ctx, twMsg)
	tw.Send(ctx, twMsg)
	_, err := tw.Send(ctx, twMsg)
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.AccountFailure() || pe.Code != "20403" {
		t.Fatalf("Send on a suspended account = %v, want an account failure 20403", err)
	}
}
