package providertest

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// receiptPath is where the tests' receivers take receipts.
const receiptPath = "/v1/receipts/acct"

// atOnce is the ReceiptConfig.MaxLatency that posts receipts without delay.
const atOnce = -1

// gotReceipt is one post a receiver took.
type gotReceipt struct {
	at     time.Time
	header http.Header
	body   []byte
	params map[string]string // the form's values, or the JSON object's
}

// receiver is an httptest server that keeps the receipts posted to it and
// answers each with what its check returns.
type receiver struct {
	srv   *httptest.Server
	url   string // the callback URL
	check func(gotReceipt) int

	mu  sync.Mutex
	got []gotReceipt // guarded by mu
}

// newReceiver starts a receiver whose check (nil: always 200) decides the
// answer; it runs on the server's goroutines and must not call t.Fatal.
func newReceiver(t *testing.T, check func(gotReceipt) int) *receiver {
	t.Helper()
	rc := &receiver{check: check}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := gotReceipt{at: time.Now(), header: r.Header.Clone(), body: body, params: map[string]string{}}
		if r.Method != http.MethodPost || r.URL.Path != receiptPath {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			_ = json.Unmarshal(body, &g.params)
		} else {
			f, _ := url.ParseQuery(string(body))
			for k := range f {
				g.params[k] = f.Get(k)
			}
		}
		rc.mu.Lock()
		rc.got = append(rc.got, g)
		rc.mu.Unlock()
		status := http.StatusOK
		if rc.check != nil {
			status = rc.check(g)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	rc.url = rc.srv.URL + receiptPath
	return rc
}

func (rc *receiver) receipts() []gotReceipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// closeSim closes s when the test ends (before the receiver it posts to).
func closeSim(t *testing.T, s *Simulator) *Simulator {
	t.Helper()
	t.Cleanup(s.Close)
	return s
}

// waitReceipts waits, at most 2 s, until s has done every planned receipt.
func waitReceipts(t *testing.T, s *Simulator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.WaitReceipts(ctx); err != nil {
		t.Fatalf("WaitReceipts: %v (stats %+v)", err, s.ReceiptStats())
	}
}

// The test's own checks of the three signatures, written from the
// providers' documents apart from the Simulator's.

func twilioSigValid(token, rawURL string, form map[string]string, sig string) bool {
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	s := rawURL
	for _, k := range names {
		s += k + form[k]
	}
	m := hmac.New(sha1.New, []byte(token))
	io.WriteString(m, s)
	return hmac.Equal([]byte(base64.StdEncoding.EncodeToString(m.Sum(nil))), []byte(sig))
}

func vonageSigValid(secret, method string, params map[string]string) bool {
	names := make([]string, 0, len(params))
	for k := range params {
		if k != "sig" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var s string
	for _, k := range names {
		v := strings.ReplaceAll(strings.ReplaceAll(params[k], "&", "_"), "=", "_")
		s += "&" + k + "=" + v
	}
	var sum []byte
	mac := func(h func() hash.Hash) []byte {
		m := hmac.New(h, []byte(secret))
		io.WriteString(m, s)
		return m.Sum(nil)
	}
	switch method {
	case "", "md5hash":
		d := md5.Sum([]byte(s + secret))
		sum = d[:]
	case "md5":
		sum = mac(md5.New)
	case "sha1":
		sum = mac(sha1.New)
	case "sha256":
		sum = mac(sha256.New)
	case "sha512":
		sum = mac(sha512.New)
	}
	return sum != nil && strings.EqualFold(hex.EncodeToString(sum), params["sig"])
}

func genericSigValid(secret string, body []byte, header string) bool {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal([]byte("sha256="+hex.EncodeToString(m.Sum(nil))), []byte(header))
}

// The senders: a valid request through s's ServeHTTP asking for receipts
// at callback, and the provider's id(s) it answered.

func sendGeneric(t *testing.T, s *Simulator, ref, to, callback string) string {
	t.Helper()
	body := fmt.Sprintf(`{"to":%q,"body":"Your code is 482913","client_ref":%q,"status_callback":%q}`, to, ref, callback)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Idempotency-Key", "key-"+ref) // the receipt echoes client_ref, not this
	w := serve(t, s, r)
	var a struct{ ID string }
	if err := json.Unmarshal(w.Body.Bytes(), &a); w.Code != http.StatusOK || err != nil || a.ID == "" {
		t.Fatalf("generic send: %d %s", w.Code, w.Body)
	}
	return a.ID
}

func sendTwilio(t *testing.T, s *Simulator, to, callback string) string {
	t.Helper()
	return sendTwilioAs(t, s, testToken, to, callback)
}

func sendTwilioAs(t *testing.T, s *Simulator, token, to, callback string) string {
	t.Helper()
	f := url.Values{"To": {to}, "From": {testTwilioFrom}, "Body": {"Your code is 482913"}, "StatusCallback": {callback}}
	r := httptest.NewRequest(http.MethodPost, "/2010-04-01/Accounts/"+testTwilioSID+"/Messages.json", strings.NewReader(f.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth(testTwilioSID, token)
	w := serve(t, s, r)
	var m struct{ Sid string }
	if err := json.Unmarshal(w.Body.Bytes(), &m); w.Code != http.StatusCreated || err != nil {
		t.Fatalf("twilio send: %d %s", w.Code, w.Body)
	}
	return m.Sid
}

func sendVonage(t *testing.T, s *Simulator, ref, to, text, callback string) (*httptest.ResponseRecorder, []string) {
	t.Helper()
	f := url.Values{"api_key": {vonageTestKey}, "api_secret": {vonageTestSecret}, "from": {vonageTestFrom},
		"to": {strings.TrimPrefix(to, "+")}, "text": {text}, "client-ref": {ref}, "callback": {callback}}
	r := httptest.NewRequest(http.MethodPost, "/sms/json", strings.NewReader(f.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := serve(t, s, r)
	var a struct {
		Messages []struct {
			ID     string `json:"message-id"`
			Status string
		}
	}
	_ = json.Unmarshal(w.Body.Bytes(), &a)
	var ids []string
	for _, m := range a.Messages {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return w, ids
}

func TestReceiptSignaturesMatchTheOfficialVectors(t *testing.T) {
	// twilio-go's and twilio-python's request_validator tests, token 12345.
	goParams := url.Values{"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
		"Caller": {"+14158675309"}, "From": {"+14158675309"}, "ReasonConferenceEnded": {"test"}, "Reason": {"Participant"}}
	pyParams := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Digits": {"1234"}, "From": {"+14158675309"},
		"To": {"+18005551212"}, "Caller": {"+14158675309"}}
	dupParams := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
	for _, c := range []struct {
		url    string
		params url.Values
		want   string
	}{
		{"https://mycompany.com/myapp.php?foo=1&bar=2", goParams, "vOEb5UThFn24KEfnOFLQY2AE5FY="},     // T1
		{"http://mycompany.com/myapp.php?foo=1&bar=2", goParams, "n2xBNyzSW7rfYStDtOFiFMv7qNo="},      // T3
		{"https://mycompany.com/myapp.php?foo=1&bar=2", pyParams, "RSOYDt4T1cUTdK1PDd93/VVr8B8="},     // P1
		{"https://mycompany.com/myapp.php?foo=1&bar=2", dupParams, "IK+Dwps556ElfBT0I3Rgjkr1wJU="},    // P2
		{"https://mycompany.com:443/myapp.php?foo=1&bar=2", pyParams, "kvajT1Ptam85bY51eRf/AJRuM3w="}, // P5
	} {
		if got := twilioSignature("12345", c.url, c.params); got != c.want {
			t.Errorf("twilioSignature(%s, %v) = %s, want %s", c.url, c.params, got, c.want)
		}
	}

	// vonage-node-sdk's inbound webhook vectors (N), vonage-python-sdk v3's
	// (Y) and v4's '&' and '=' case (V3), vonage-java-sdk's (J).
	n := map[string]string{"message-timestamp": "2013-11-21 15:27:30", "messageId": "020000001B0FE827",
		"msisdn": "14843472194", "text": "Test again", "timestamp": "1385047698", "to": "13239877404", "type": "text"}
	y := map[string]string{"a": "1", "b": "2", "timestamp": "1461605396", "sig": "ignored"}
	v3 := map[string]string{"param1": "value&1", "param2": "value=2", "timestamp": "1234567890"}
	j := map[string]string{"a": "alphabet", "b": "bananas", "timestamp": "2100"}
	for _, c := range []struct {
		secret, method string
		params         map[string]string
		want           string
	}{
		{"my_secret_key_for_testing", "md5hash", n, "d2e7b1dc968737c5998ad624e02f90b7"},
		{"my_secret_key_for_testing", "md5", n, "DDEBD46008C2D4E93CCE578A332A52D5"},
		{"my_secret_key_for_testing", "sha1", n, "27D0D05C2876C7CB1720DBCDBA4D492E1E55C09A"},
		{"my_secret_key_for_testing", "sha256", n, "DDB8397C2B90AAC7F3882D306475C9A5058C92322EEF43C92B298B6E0FC0D330"},
		{"my_secret_key_for_testing", "sha512", n, "E0D3C650F8C9D1A5C174D10DDDBFB003E561F59B265616208B0487C5D819481CD3C311D59CF6165ECD1139622D5BA3A256C0D763AC4A9AD9144B5A426B94FE82"},
		{"secret", "", y, "6af838ef94998832dbfc29020b564830"},
		{"secret", "md5", y, "c15c21ced558c93a226c305f58f902f2"},
		{"secret", "sha1", y, "3e19a4e6880fdc2c1426bfd0587c98b9532f0210"},
		{"secret", "sha256", y, "a321e824b9b816be7c3f28859a31749a098713d39f613c80d455bbaffae1cd24"},
		{"signature_secret", "md5", v3, "2bbf0abafb2c55e5af6231513896a2ac"},
		{"abcde", "md5hash", j, "7d43241108912b32cc315b48ce681acf"},
		{"abcde", "sha512", j, "1c834a1f6a377d4473971387b065cb38e2ad6c4869ba77b7b53e207a344e87ba04b456dfc697b371a2d1ce476d01dafd4394aa97525eff23badad39d2389a710"},
		{"abcde", "sha3", j, ""}, // an unknown method signs nothing
	} {
		if got := vonageSignature(c.method, c.secret, c.params); !strings.EqualFold(got, c.want) {
			t.Errorf("vonageSignature(%q, %q, %v) = %s, want %s", c.method, c.secret, c.params, got, c.want)
		}
	}

	// The generic API's: computed apart (Python's hmac) for this body.
	body := `{"id":"msg-00000001","client_ref":"m-1","status":"delivered","error_code":"","timestamp":"2026-11-29T12:00:00.000Z"}`
	want := "sha256=ddf3dc6126f7b53f91f091ef25091b8ae823e40fa8a2a24f1af43fb56691b954"
	if got := genericSignature("rcpt-secret", []byte(body)); got != want {
		t.Errorf("genericSignature = %s, want %s", got, want)
	}
}

func TestGenericPostsSignedReceipts(t *testing.T) {
	const secret = "rcpt-secret-0123"
	rc := newReceiver(t, func(g gotReceipt) int {
		if !genericSigValid(secret, g.body, g.header.Get("X-Signature")) {
			return http.StatusForbidden
		}
		return http.StatusOK
	})
	clock := newFakeClock(t0)
	s := closeSim(t, NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce, Secret: secret}}, WithClock(clock.Now)))
	id := sendGeneric(t, s, "login-1", "+819012345678", rc.url)
	sendGeneric(t, s, "no-receipt", "+819012345678", "") // asks for none
	waitReceipts(t, s)
	got := rc.receipts()
	if len(got) != 1 {
		t.Fatalf("receiver got %d receipts, want 1", len(got))
	}
	want := fmt.Sprintf(`{"id":%q,"client_ref":"login-1","status":"delivered","error_code":"","timestamp":"2026-11-29T12:00:00.000Z"}`, id)
	if string(got[0].body) != want || got[0].header.Get("Content-Type") != "application/json" {
		t.Errorf("receipt %s (%s), want %s", got[0].body, got[0].header.Get("Content-Type"), want)
	}
	st := s.ReceiptStats()
	if st.Posted != 1 || st.ByStatus["delivered"] != 1 || st.Messages != 1 || st.Pending != 0 || st.Attempts != 1 {
		t.Errorf("stats %+v", st)
	}

	// Forged: signed with another key, which the receiver refuses.
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Forged, c.Retries = 1, -1 })
	sendGeneric(t, s, "login-2", "+819012345678", rc.url)
	waitReceipts(t, s)
	if st := s.ReceiptStats(); st.Forged != 1 || st.Failed != 1 || st.Refused[http.StatusForbidden] != 1 {
		t.Errorf("after a forged receipt: stats %+v", st)
	}
	// Unsigned without a secret.
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Forged, c.Secret = 0, "" })
	sendGeneric(t, s, "login-3", "+819012345678", rc.url)
	waitReceipts(t, s)
	if got := rc.receipts(); len(got) != 3 || got[2].header.Get("X-Signature") != "" {
		t.Errorf("without a secret: %d receipts, the last with X-Signature %q", len(got), got[len(got)-1].header.Get("X-Signature"))
	}
}

func TestTwilioPostsSignedReceipts(t *testing.T) {
	var rc *receiver
	rc = newReceiver(t, func(g gotReceipt) int {
		sig := g.header.Get("X-Twilio-Signature")
		if !twilioSigValid(testToken, rc.url, g.params, sig) && !twilioSigValid("rotated-token", rc.url, g.params, sig) {
			return http.StatusForbidden
		}
		return http.StatusOK
	})
	clock := newFakeClock(t0)
	s := closeSim(t, NewTwilio(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce,
		Intermediate: []string{"sent"},
		Delivered:    []Delivery{{Prefix: "+62", Share: 0}},
	}}, testTwilioSID, WithClock(clock.Now)))
	ok := sendTwilio(t, s, "+819087654321", rc.url)
	bad := sendTwilio(t, s, "+6281234567890", rc.url)
	waitReceipts(t, s)

	bySid := map[string][]map[string]string{}
	for _, g := range rc.receipts() {
		if g.header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			t.Errorf("Content-Type %q", g.header.Get("Content-Type"))
		}
		bySid[g.params["MessageSid"]] = append(bySid[g.params["MessageSid"]], g.params)
	}
	want := map[string][]map[string]string{
		ok: {
			{"AccountSid": testTwilioSID, "ApiVersion": "2010-04-01", "MessageSid": ok, "SmsSid": ok, "MessageStatus": "sent",
				"SmsStatus": "sent", "To": "+819087654321", "From": testTwilioFrom},
			{"AccountSid": testTwilioSID, "ApiVersion": "2010-04-01", "MessageSid": ok, "SmsSid": ok, "MessageStatus": "delivered",
				"SmsStatus": "delivered", "To": "+819087654321", "From": testTwilioFrom, "RawDlrDoneDate": "2611291200"},
		},
		bad: {
			{"AccountSid": testTwilioSID, "ApiVersion": "2010-04-01", "MessageSid": bad, "SmsSid": bad, "MessageStatus": "sent",
				"SmsStatus": "sent", "To": "+6281234567890", "From": testTwilioFrom},
			{"AccountSid": testTwilioSID, "ApiVersion": "2010-04-01", "MessageSid": bad, "SmsSid": bad, "MessageStatus": "undelivered",
				"SmsStatus": "undelivered", "To": "+6281234567890", "From": testTwilioFrom, "RawDlrDoneDate": "2611291200", "ErrorCode": "30007"},
		},
	}
	if fmt.Sprint(bySid) != fmt.Sprint(want) {
		t.Errorf("receipts by sid\n%v\nwant\n%v", bySid, want)
	}
	if st := s.ReceiptStats(); st.Posted != 4 || st.ByStatus["undelivered"] != 1 || st.ByStatus["sent"] != 2 {
		t.Errorf("stats %+v", st)
	}

	// The receipts are signed with the auth token of the moment (SetToken),
	// and a forged one is not.
	s.SetToken("rotated-token")
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Intermediate, c.Forged, c.Retries = nil, 1, -1 })
	sendTwilioAs(t, s, "rotated-token", "+819087654321", rc.url)
	waitReceipts(t, s)
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Forged = 0 })
	sendTwilioAs(t, s, "rotated-token", "+819087654321", rc.url)
	waitReceipts(t, s)
	got := rc.receipts()
	if len(got) != 6 {
		t.Fatalf("%d receipts, want 6", len(got))
	}
	if g := got[4]; twilioSigValid("rotated-token", rc.url, g.params, g.header.Get("X-Twilio-Signature")) {
		t.Error("a forged receipt verifies")
	}
	if g := got[5]; !twilioSigValid("rotated-token", rc.url, g.params, g.header.Get("X-Twilio-Signature")) {
		t.Error("a receipt after SetToken does not verify with the new token")
	}
	if st := s.ReceiptStats(); st.Forged != 1 || st.Failed != 1 || st.Posted != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestVonagePostsAReceiptPerPart(t *testing.T) {
	const secret = "vonage-sig-secret"
	for _, c := range []struct {
		method string
		json   bool
	}{{"", false}, {"sha256", true}, {"md5", false}, {"sha512", false}, {"sha1", true}} {
		t.Run(fmt.Sprintf("%s json=%v", c.method, c.json), func(t *testing.T) {
			rc := newReceiver(t, func(g gotReceipt) int {
				if !vonageSigValid(secret, c.method, g.params) {
					return http.StatusForbidden
				}
				return http.StatusOK
			})
			clock := newFakeClock(t0)
			s := closeSim(t, NewVonage(Config{Token: vonageTestSecret, Receipts: ReceiptConfig{MaxLatency: atOnce,
				Secret: secret, SignatureMethod: c.method, JSON: c.json,
				Delivered: []Delivery{{Prefix: "+62", Share: 0}},
			}}, vonageTestKey, WithClock(clock.Now)))
			long := strings.Repeat("Your code is 482913. ", 10) // 210 GSM-7 characters: 2 parts
			_, ids := sendVonage(t, s, "otp-&=1", "+6281234567890", long, rc.url)
			if len(ids) != 2 {
				t.Fatalf("parts %v, want 2", ids)
			}
			waitReceipts(t, s)
			got := rc.receipts()
			if len(got) != 2 {
				t.Fatalf("receiver got %d receipts, want 2", len(got))
			}
			for i, want := range []map[string]string{
				{"messageId": ids[0], "status": "delivered", "err-code": "0"},
				{"messageId": ids[1], "status": "rejected", "err-code": "6"},
			} {
				p := got[i].params
				want["msisdn"], want["to"], want["client-ref"], want["api-key"] = "6281234567890", vonageTestFrom, "otp-&=1", vonageTestKey
				want["scts"], want["message-timestamp"], want["timestamp"] = "2611291200", "2026-11-29 12:00:00", "1795953600"
				for k, v := range want {
					if p[k] != v {
						t.Errorf("part %d: %s = %q, want %q", i, k, p[k], v)
					}
				}
				if p["nonce"] == "" || p["sig"] == "" {
					t.Errorf("part %d: nonce %q, sig %q", i, p["nonce"], p["sig"])
				}
			}
			if st := s.ReceiptStats(); st.Posted != 2 || st.Failed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestVonageUnsignedAndForgedReceipts(t *testing.T) {
	rc := newReceiver(t, nil)
	s := closeSim(t, NewVonage(Config{Token: vonageTestSecret, Receipts: ReceiptConfig{MaxLatency: atOnce}}, vonageTestKey))
	sendVonage(t, s, "r1", "+819012345678", "hi", rc.url)
	waitReceipts(t, s)
	if p := rc.receipts()[0].params; p["sig"] != "" || p["timestamp"] != "" || p["nonce"] != "" || p["status"] != "delivered" {
		t.Errorf("an unsigned receipt: %v", p)
	}
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Secret, c.Forged = "right", 1 })
	sendVonage(t, s, "r2", "+819012345678", "hi", rc.url)
	waitReceipts(t, s)
	if p := rc.receipts()[1].params; p["sig"] == "" || vonageSigValid("right", "", p) {
		t.Errorf("a forged receipt verifies: %v", p)
	}
	// A replayed receipt is the same bytes, its nonce and sig included.
	s.UpdateReceipts(func(c *ReceiptConfig) { c.Forged, c.Replayed = 0, 1 })
	sendVonage(t, s, "r4", "+819012345678", "hi", rc.url)
	waitReceipts(t, s)
	if got := rc.receipts(); len(got) != 4 || string(got[2].body) != string(got[3].body) || !vonageSigValid("right", "", got[3].params) {
		t.Errorf("a replayed receipt: %d receipts, the last two %s and %s", len(got), got[2].body, got[len(got)-1].body)
	}
	if st := s.ReceiptStats(); st.Replayed != 1 || st.Posted != 4 {
		t.Errorf("stats %+v", st)
	}
	// A callback Vonage would refuse is refused: status 23.
	w, ids := sendVonage(t, s, "r3", "+819012345678", "hi", "https://example.com/"+strings.Repeat("x", 81))
	if !strings.Contains(w.Body.String(), `"status":"23"`) || ids != nil {
		t.Errorf("a 101-character callback: %s", w.Body)
	}
}

func TestReceiptDeliveredSharePerPrefix(t *testing.T) {
	rc := newReceiver(t, nil)
	s := closeSim(t, NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce,
		Delivered: []Delivery{
			{Prefix: "+62", Share: 0.25, ErrorCode: "filtered"},
			{Prefix: "+6281", Share: 1}, // the longest prefix decides
			{Prefix: "+44", Share: 0, Status: "expired"},
		},
		FailCode: "E1",
	}}))
	send := func(prefix string, n int) {
		for i := range n {
			sendGeneric(t, s, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s%09d", prefix, i), rc.url)
		}
	}
	send("+6221", 8)
	send("+6281", 4)
	send("+81", 4)
	send("+44", 1)
	waitReceipts(t, s)
	s.SetDelivered("+81", 0, "E42") // from now on
	send("+81", 2)
	waitReceipts(t, s)

	count := map[string]int{}
	for _, g := range rc.receipts() {
		prefix, _, _ := strings.Cut(g.params["client_ref"], "-")
		count[prefix+" "+g.params["status"]+" "+g.params["error_code"]]++
	}
	want := map[string]int{
		"+6221 delivered ": 2, "+6221 undelivered filtered": 6,
		"+6281 delivered ": 4,
		"+81 delivered ":   4, "+81 undelivered E42": 2,
		"+44 expired E1": 1,
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("receipts %v, want %v", count, want)
	}
}

func TestReceiptDuplicatesAndOutOfOrder(t *testing.T) {
	rc := newReceiver(t, nil)
	s := closeSim(t, NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce,
		Intermediate: []string{"sent"}, Duplicates: 0.5, OutOfOrder: 1.0 / 3,
	}}))
	for i := range 6 {
		sendGeneric(t, s, fmt.Sprint("m", i), "+819012345678", rc.url)
	}
	waitReceipts(t, s)
	seq := map[string]string{}
	for _, g := range rc.receipts() {
		seq[g.params["client_ref"]] += g.params["status"] + " "
	}
	want := map[string]string{ // a message's receipts come in the planned order
		"m0": "sent delivered delivered ", "m1": "delivered sent ", "m2": "sent delivered delivered ",
		"m3": "sent delivered ", "m4": "delivered sent delivered ", "m5": "sent delivered ",
	}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Errorf("receipts per message %v, want %v", seq, want)
	}
	if st := s.ReceiptStats(); st.Duplicated != 3 || st.Reordered != 2 || st.Posted != 15 {
		t.Errorf("stats %+v", st)
	}
}

func TestReceiptLatency(t *testing.T) {
	const latency = 80 * time.Millisecond
	for _, c := range []struct {
		name       string
		cfg        ReceiptConfig
		mid, final time.Duration // the least time before each receipt
	}{
		{"fixed", ReceiptConfig{MinLatency: latency, MaxLatency: latency, Intermediate: []string{"sent"}}, latency / 2, latency},
		// The default leaves the sender time to record its send.
		{"default", ReceiptConfig{Intermediate: []string{"sent"}}, 50 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, nil)
			s := closeSim(t, NewGeneric(Config{Token: testToken, Receipts: c.cfg}))
			start := time.Now()
			sendGeneric(t, s, "m", "+819012345678", rc.url)
			waitReceipts(t, s)
			got := rc.receipts()
			if len(got) != 2 {
				t.Fatalf("%d receipts, want 2", len(got))
			}
			if d := got[0].at.Sub(start); d < c.mid {
				t.Errorf("the intermediate receipt came after %v, want at least %v", d, c.mid)
			}
			if d := got[1].at.Sub(start); d < c.final {
				t.Errorf("the final receipt came after %v, want at least %v", d, c.final)
			}
		})
	}
}

func TestReceiptRetries(t *testing.T) {
	var mu sync.Mutex
	answers := []int{500, 502, 200} // then 503 for ever
	rc := newReceiver(t, func(gotReceipt) int {
		mu.Lock()
		defer mu.Unlock()
		if len(answers) == 0 {
			return http.StatusServiceUnavailable
		}
		a := answers[0]
		answers = answers[1:]
		return a
	})
	s := closeSim(t, NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce, RetryDelay: time.Millisecond, Retries: 2}}))
	sendGeneric(t, s, "m1", "+819012345678", rc.url) // 500, 502, then 200
	waitReceipts(t, s)
	sendGeneric(t, s, "m2", "+819012345678", rc.url) // 503 three times: given up
	waitReceipts(t, s)
	st := s.ReceiptStats()
	if st.Posted != 1 || st.Failed != 1 || st.Attempts != 6 || st.Retries != 4 ||
		fmt.Sprint(st.Refused) != "map[500:1 502:1 503:3]" || len(rc.receipts()) != 6 {
		t.Errorf("stats %+v, receiver got %d", st, len(rc.receipts()))
	}
	posted := s.PostedReceipts()
	if len(posted) != 2 || posted[0].Answer != 200 || posted[1].Answer != 503 || posted[1].Ref != "m2" {
		t.Errorf("posted %+v", posted)
	}
}

func TestReceiptCloseStopsEverything(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	held := make(chan struct{}, 1)
	rc := newReceiver(t, func(g gotReceipt) int {
		if g.params["client_ref"] == "held" {
			held <- struct{}{}
			<-release // the post is canceled while its answer waits here
		}
		return http.StatusOK
	})
	s := NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce, Queue: 2, Workers: 200}}) // many goroutines to wait for
	sendGeneric(t, s, "held", "+819012345678", rc.url)
	<-held
	s.UpdateReceipts(func(c *ReceiptConfig) { c.MinLatency, c.Intermediate = time.Hour, []string{"sent"} })
	sendGeneric(t, s, "later", "+819012345678", rc.url)
	sendGeneric(t, s, "over", "+819012345678", rc.url) // past Queue: dropped at once
	if st := s.ReceiptStats(); st.Pending != 2 || st.Dropped != 2 {
		t.Errorf("before Close: stats %+v", st)
	}

	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return with a post under way")
	}
	// A worker that has run its deferred wg.Done may still be on the stack
	// for an instant after Close returns: allow it that instant, no more.
	for i := 0; stacksHold("(*receiptPoster)"); i++ {
		if i == 100 {
			t.Fatal("Close returned before the posting goroutines ended")
		}
		time.Sleep(time.Millisecond)
	}
	unblock()
	sendGeneric(t, s, "after", "+819012345678", rc.url) // answered, but no receipt
	if err := s.WaitReceipts(context.Background()); err != nil {
		t.Errorf("WaitReceipts after Close: %v", err)
	}
	st := s.ReceiptStats()
	if st.Pending != 0 || st.Dropped != 2+1+2+2 || st.Posted != 0 || st.Messages != 4 {
		t.Errorf("after Close: stats %+v", st)
	}
	s.Close() // twice is fine
	rc.srv.Close()
	goleak.VerifyNone(t)
}

func TestReceiptCloseClosesItsConnections(t *testing.T) {
	rc := newReceiver(t, nil)
	s := NewGeneric(Config{Token: testToken, Receipts: ReceiptConfig{MaxLatency: atOnce}})
	sendGeneric(t, s, "m", "+819012345678", rc.url)
	waitReceipts(t, s)
	s.Close()
	// The receiver stays up: only the Simulator can close the connection
	// it kept for the next receipt.
	for deadline := time.Now().Add(time.Second); stacksHold("net/http.(*persistConn)"); {
		if time.Now().After(deadline) {
			t.Fatal("a connection to the receiver is still open after Close")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stacksHold reports whether a goroutine's stack names fn.
func stacksHold(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

func TestReceiptSharesAreExact(t *testing.T) {
	for _, share := range []float64{0, 0.1, 0.25, 0.5, 0.9, 1, -1, 2} {
		p := newReceiptPoster(ReceiptConfig{}, 0, genericDialect{}, nil)
		n := 0
		for range 100 {
			if p.take("k", share) {
				n++
			}
		}
		if want := int(100 * min(max(share, 0), 1)); n != want {
			t.Errorf("share %v: %d of 100, want %d", share, n, want)
		}
	}
}
