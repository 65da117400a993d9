package provider

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var (
	_ ReceiptReader = (*Client)(nil)
	_ ReceiptReader = (*Twilio)(nil)
	_ ReceiptReader = (*Vonage)(nil)
)

// receiptURL is the URL the tests' adapters were told to post receipts to.
const receiptURL = "https://receipts.example.com/v1/receipts/primary"

// readReceiptFile decodes testdata/receipts/name into v.
func readReceiptFile(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "receipts", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// The signers below are the providers' algorithms written again from
// their documentation, apart from the adapters' code, so that a test
// checks one writing against the other.

// twilioSign is X-Twilio-Signature for a form posted to rawURL.
func twilioSign(token, rawURL string, form url.Values) string {
	s := rawURL
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		vs := append([]string(nil), form[k]...)
		sort.Strings(vs)
		for i, v := range vs {
			if i == 0 || vs[i-1] != v {
				s += k + v
			}
		}
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// vonageSign is a Vonage signed webhook's sig over params (sig left out).
func vonageSign(method, secret string, params map[string]string) string {
	names := make([]string, 0, len(params))
	for k := range params {
		if k != "sig" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	s := ""
	for _, k := range names {
		v := strings.ReplaceAll(strings.ReplaceAll(params[k], "&", "_"), "=", "_")
		s += "&" + k + "=" + v
	}
	if method == "" || method == "md5hash" {
		sum := md5.Sum([]byte(s + secret))
		return hex.EncodeToString(sum[:])
	}
	h := map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}[method]
	m := hmac.New(h, []byte(secret))
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

// clientSign is the generic API's X-Signature for body.
func clientSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// formBody encodes pairs as a form body, in their order.
func formBody(pairs [][2]string) string {
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(p[0]) + "=" + url.QueryEscape(p[1]))
	}
	return b.String()
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// checkReceiptErr fails unless err is want (nil: no error), and checks
// that err shows nothing of the request.
func checkReceiptErr(t *testing.T, err, want error, r ReceiptRequest, secrets ...string) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("ReadReceipt: %v, want %v", err, want)
	}
	if err == nil {
		return
	}
	for _, s := range append(secrets, r.URL) {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q shows %q", err, s)
		}
	}
}

func TestDeliveryStatus(t *testing.T) {
	final := map[DeliveryStatus]bool{
		StatusQueued: false, StatusAccepted: false, StatusSending: false, StatusSent: false,
		StatusBuffered: false, StatusUnknown: false,
		StatusDelivered: true, StatusUndelivered: true, StatusFailed: true, StatusExpired: true, StatusRejected: true,
	}
	for s, want := range final {
		if s.Final() != want {
			t.Errorf("%s.Final() = %v, want %v", s, s.Final(), want)
		}
		if s.Delivered() != (s == StatusDelivered) {
			t.Errorf("%s.Delivered() = %v", s, s.Delivered())
		}
		if got, ok := ParseDeliveryStatus(string(s)); !ok || got != s {
			t.Errorf("ParseDeliveryStatus(%q) = %q, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "Delivered", "read", "canceled", " sent"} {
		if _, ok := ParseDeliveryStatus(s); ok {
			t.Errorf("ParseDeliveryStatus(%q) is ok", s)
		}
	}
}

func TestCheckReport(t *testing.T) {
	ok := DeliveryReport{ProviderID: "SM1", Status: StatusSent}
	if err := checkReport(ok); err != nil {
		t.Fatalf("checkReport(%+v): %v", ok, err)
	}
	for name, edit := range map[string]func(*DeliveryReport){
		"no id":             func(d *DeliveryReport) { d.ProviderID = "" },
		"id with a space":   func(d *DeliveryReport) { d.ProviderID = "SM 1" },
		"id too long":       func(d *DeliveryReport) { d.ProviderID = strings.Repeat("a", maxProviderID+1) },
		"ref with a NUL":    func(d *DeliveryReport) { d.Ref = "a\x00" },
		"ref too long":      func(d *DeliveryReport) { d.Ref = strings.Repeat("r", maxRef+1) },
		"code with a space": func(d *DeliveryReport) { d.ErrorCode = "30 07" },
		"no status":         func(d *DeliveryReport) { d.Status = "" },
		"foreign status":    func(d *DeliveryReport) { d.Status = "read" },
	} {
		d := ok
		edit(&d)
		if err := checkReport(d); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: checkReport = %v, want ErrMalformed", name, err)
		}
	}
}

func TestReceiptRequestsAskForReceipts(t *testing.T) {
	const cb = "https://receipts.example.com/v1/receipts/primary?x=1"
	t.Run("twilio", func(t *testing.T) {
		for _, opt := range []Option{WithStatusCallback(cb), nil} {
			srv, seen := recordVonage(t, 201, twilioFixture(t, "message_created.json")) // any form-reading server
			var opts []Option
			if opt != nil {
				opts = append(opts, opt)
			}
			tw := newTestTwilio(t, srv.URL, nil, opts...)
			if _, err := tw.Send(t.Context(), testMsg); err != nil {
				t.Fatal(err)
			}
			got, has := seen()[0].form["StatusCallback"]
			if opt != nil && (len(got) != 1 || got[0] != cb) || opt == nil && has {
				t.Errorf("with option %v: StatusCallback %q", opt != nil, got)
			}
		}
	})
	t.Run("vonage", func(t *testing.T) {
		for _, opt := range []Option{WithStatusCallback(cb), nil} {
			srv, seen := recordVonage(t, 200, readVonageFile(t, "success.json"))
			var opts []Option
			if opt != nil {
				opts = append(opts, opt)
			}
			v := newTestVonage(t, srv.URL, nil, opts...)
			if _, err := v.Send(t.Context(), testMsg); err != nil {
				t.Fatal(err)
			}
			got, has := seen()[0].form["callback"]
			if opt != nil && (len(got) != 1 || got[0] != cb) || opt == nil && has {
				t.Errorf("with option %v: callback %q", opt != nil, got)
			}
		}
	})
	t.Run("generic", func(t *testing.T) {
		for _, opt := range []Option{WithStatusCallback(cb), nil} {
			var body map[string]any
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body = nil
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					t.Errorf("body: %v", err)
				}
			}))
			var opts []Option
			if opt != nil {
				opts = append(opts, opt)
			}
			c := newTestClient(t, srv.URL, opts...)
			if _, err := c.Send(t.Context(), testMsg); err != nil {
				t.Fatal(err)
			}
			got, has := body["status_callback"]
			if opt != nil && got != cb || opt == nil && has {
				t.Errorf("with option %v: status_callback %v", opt != nil, got)
			}
		}
	})
}

func TestVonageReceiptParts(t *testing.T) {
	srv, _ := recordVonage(t, 200, readVonageFile(t, "multipart.json"))
	rc, err := newTestVonage(t, srv.URL, nil).Send(t.Context(), testMsg)
	want := []string{"62dfdf68-6c7c-479a-a190-5c52f798a787", "72ff9536-62d6-455a-9f0b-65f3c265b423"}
	if err != nil || rc.ID != want[0] || strings.Join(rc.Parts, ",") != strings.Join(want, ",") {
		t.Fatalf("Send = %+v, %v; want ID %s, Parts %v", rc, err, want[0], want)
	}
	srv, _ = recordVonage(t, 200, readVonageFile(t, "partial.json"))
	rc, err = newTestVonage(t, srv.URL, nil).Send(t.Context(), testMsg)
	if err != nil || len(rc.Parts) == 0 || rc.Parts[0] != rc.ID {
		t.Fatalf("partial: Send = %+v, %v; want Parts from the accepted part", rc, err)
	}
}

// TestTwilioSignatureVectors checks every official X-Twilio-Signature
// vector: a valid one verifies (and, naming no message, is ErrMalformed
// through ReadReceipt), an invalid one is ErrForged.
func TestTwilioSignatureVectors(t *testing.T) {
	var file struct {
		Token   string
		Vectors []struct {
			Name, URL, Body, Signature string
			Params                     [][2]string
			Valid                      bool
		}
	}
	readReceiptFile(t, "twilio_signatures.json", &file)
	if len(file.Vectors) < 16 {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	tw := newTestTwilio(t, DefaultTwilioURL, func(c *TwilioConfig) { c.AuthToken = StaticSecret(file.Token) })
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			body := v.Body
			if v.Params != nil {
				body = formBody(v.Params)
			}
			r := ReceiptRequest{URL: v.URL, Header: header("X-Twilio-Signature", v.Signature), Body: []byte(body)}
			_, err := twilioVerify(file.Token, r)
			if v.Valid != (err == nil) || !v.Valid && !errors.Is(err, ErrForged) {
				t.Fatalf("verify: %v, want valid %v", err, v.Valid)
			}
			want := ErrForged
			if v.Valid {
				want = ErrMalformed // verified, but no MessageSid
			}
			_, err = tw.ReadReceipt(r)
			checkReceiptErr(t, err, want, r, file.Token)
		})
	}
}

// TestVonageSignatureVectors checks every official Vonage sig vector, each
// posted as a form and as JSON: a valid one verifies (and, with no
// status, is ErrMalformed through ReadReceipt); an invalid one (the
// outbound-signing vectors A, Java's blank value) is ErrForged.
func TestVonageSignatureVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name, Secret, Method, Sig string
			Params                    map[string]string
			Valid                     bool
		}
	}
	readReceiptFile(t, "vonage_signatures.json", &file)
	if len(file.Vectors) < 27 {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			vo, err := NewVonage(VonageConfig{APIKey: vonageTestKey, APISecret: StaticSecret(vonageTestSecret), From: vonageTestFrom,
				SignatureSecret: StaticSecret(v.Secret), SignatureMethod: v.Method})
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]string{"sig": v.Sig}
			form := url.Values{"sig": {v.Sig}}
			for k, val := range v.Params {
				params[k] = val
				form.Set(k, val)
			}
			if err := vo.verify(params); v.Valid != (err == nil) {
				t.Fatalf("verify: %v, want valid %v", err, v.Valid)
			}
			want := ErrForged
			if v.Valid {
				want = ErrMalformed
			}
			js, _ := json.Marshal(params)
			for _, r := range []ReceiptRequest{
				{URL: receiptURL, Header: header("Content-Type", "application/x-www-form-urlencoded"), Body: []byte(form.Encode())},
				{URL: receiptURL, Header: header("Content-Type", "application/json; charset=utf-8"), Body: js},
			} {
				_, err := vo.ReadReceipt(r)
				checkReceiptErr(t, err, want, r, v.Secret)
			}
		})
	}
}

// newReceiptTwilio returns a Twilio adapter whose auth token is token.
func newReceiptTwilio(t testing.TB, token *Secret) *Twilio {
	t.Helper()
	tw, err := NewTwilio(TwilioConfig{AccountSID: testTwilioSID, AuthToken: token, From: testTwilioFrom})
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

// twilioReceipt is a status callback of form, signed with token for rawURL.
func twilioReceipt(token, rawURL string, form url.Values) ReceiptRequest {
	return ReceiptRequest{
		URL:    rawURL,
		Header: header("Content-Type", "application/x-www-form-urlencoded", "X-Twilio-Signature", twilioSign(token, rawURL, form)),
		Body:   []byte(form.Encode()),
	}
}

func TestTwilioReceiptExample(t *testing.T) {
	var ex struct {
		Params map[string]string
		Want   DeliveryReport
	}
	readReceiptFile(t, "twilio_sent.json", &ex)
	form := url.Values{}
	for k, v := range ex.Params {
		form.Set(k, v)
	}
	tw := newReceiptTwilio(t, StaticSecret(testToken))
	got, err := tw.ReadReceipt(twilioReceipt(testToken, receiptURL, form))
	if err != nil || got != ex.Want {
		t.Fatalf("ReadReceipt = %+v, %v; want %+v", got, err, ex.Want)
	}
}

// TestTwilioReceiptForged checks that whatever was not signed by the auth
// token for this URL is ErrForged, and that what was (port variants, a
// token reloaded from its file) verifies.
func TestTwilioReceiptForged(t *testing.T) {
	form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}, "AccountSid": {"AC1"}, "To": {"+819012345678"}}
	signed := twilioReceipt(testToken, receiptURL, form)
	tests := []struct {
		name string
		r    func() ReceiptRequest
		want error
	}{
		{"signed", func() ReceiptRequest { return signed }, nil},
		{"signed with :443, told without", func() ReceiptRequest {
			r := twilioReceipt(testToken, "https://receipts.example.com:443/v1/receipts/primary", form)
			r.URL = receiptURL
			return r
		}, nil},
		{"signed without :8443, told with", func() ReceiptRequest {
			r := twilioReceipt(testToken, receiptURL, form)
			r.URL = "https://receipts.example.com:8443/v1/receipts/primary"
			return r
		}, nil},
		{"no signature", func() ReceiptRequest {
			r := signed
			r.Header = header("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, ErrForged},
		{"another token", func() ReceiptRequest { return twilioReceipt("other-token", receiptURL, form) }, ErrForged},
		{"a parameter added after signing", func() ReceiptRequest {
			r := signed
			r.Body = append([]byte("MessageStatus2=x&"), signed.Body...)
			return r
		}, ErrForged},
		{"a value changed", func() ReceiptRequest {
			r := signed
			r.Body = []byte(strings.Replace(string(signed.Body), "delivered", "failed", 1))
			return r
		}, ErrForged},
		{"another account's URL", func() ReceiptRequest {
			r := signed
			r.URL = "https://receipts.example.com/v1/receipts/backup"
			return r
		}, ErrForged},
		{"another scheme", func() ReceiptRequest {
			r := signed
			r.URL = strings.Replace(receiptURL, "https", "http", 1)
			return r
		}, ErrForged},
		{"a base64 signature that is not canonical", func() ReceiptRequest {
			r := signed
			s := []byte(r.Header.Get("X-Twilio-Signature"))
			s[len(s)-2]++ // "...Y=" to "...Z=": the same bytes to a lax decoder
			r.Header = header("X-Twilio-Signature", string(s))
			return r
		}, ErrForged},
		{"not a form, unsigned", func() ReceiptRequest {
			r := signed
			r.Body = []byte("%zz")
			return r
		}, ErrForged},
		{"not a form, without a signature", func() ReceiptRequest {
			return ReceiptRequest{URL: receiptURL, Header: header("Content-Type", "application/x-www-form-urlencoded"), Body: []byte("%zz")}
		}, ErrForged},
		{"a parameter given twice, unsigned", func() ReceiptRequest {
			r := signed
			r.Body = append([]byte("MessageSid=SM2&"), signed.Body...)
			return r
		}, ErrForged},
		{"not a form, signed", func() ReceiptRequest {
			// Signed over the pairs that parse, which verify: only
			// then is the body told it is no form.
			r := twilioReceipt(testToken, receiptURL, form)
			r.Body = append(r.Body, "&x=%zz"...)
			return r
		}, ErrMalformed},
		{"a parameter given twice, signed", func() ReceiptRequest {
			twice := url.Values{"MessageSid": {"SM1", "SM2"}, "MessageStatus": {"delivered"}}
			return twilioReceipt(testToken, receiptURL, twice)
		}, ErrMalformed},
	}
	tw := newReceiptTwilio(t, StaticSecret(testToken))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r()
			_, err := tw.ReadReceipt(r)
			checkReceiptErr(t, err, tt.want, r, testToken, "+819012345678")
		})
	}
	t.Run("no token", func(t *testing.T) {
		tw := newReceiptTwilio(t, StaticSecret(testToken))
		tw.cfg.AuthToken = StaticSecret("")
		if _, err := tw.ReadReceipt(twilioReceipt("", receiptURL, form)); !errors.Is(err, ErrForged) {
			t.Fatalf("ReadReceipt with no token: %v, want ErrForged", err)
		}
	})
	t.Run("rotated token", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "token")
		os.WriteFile(path, []byte("old-token\n"), 0o600)
		sec, err := FileSecret(path)
		if err != nil {
			t.Fatal(err)
		}
		tw := newReceiptTwilio(t, sec)
		os.WriteFile(path, []byte("new-token\n"), 0o600)
		if _, err := sec.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.ReadReceipt(twilioReceipt("new-token", receiptURL, form)); err != nil {
			t.Errorf("signed with the new token: %v", err)
		}
		if _, err := tw.ReadReceipt(twilioReceipt("old-token", receiptURL, form)); !errors.Is(err, ErrForged) {
			t.Errorf("signed with the old token: %v, want ErrForged", err)
		}
	})
}

func TestTwilioReceiptStatuses(t *testing.T) {
	tests := []struct {
		form url.Values
		want DeliveryReport
		err  error
	}{
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"queued"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusQueued}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"accepted"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusAccepted}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"scheduled"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusAccepted}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sending"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusSending}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusSent}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}, "RawDlrDoneDate": {"2612021205"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusDelivered}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"read"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusDelivered}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30007"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusUndelivered, ErrorCode: "30007", RouteFailed: true}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"failed"}, "ErrorCode": {"30036"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusFailed, ErrorCode: "30036"}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"canceled"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusFailed}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"partially_delivered"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusUnknown}},
		// Twilio adds statuses without notice: a new one is not refused.
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"some_new_status"}}, want: DeliveryReport{ProviderID: "SM1", Status: StatusUnknown}},
		{form: url.Values{"SmsSid": {"SM2"}, "SmsStatus": {"sent"}}, want: DeliveryReport{ProviderID: "SM2", Status: StatusSent}},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"received"}}, err: ErrMalformed},
		{form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"receiving"}}, err: ErrMalformed},
		{form: url.Values{"MessageSid": {"SM1"}}, err: ErrMalformed},
		{form: url.Values{"MessageStatus": {"sent"}}, err: ErrMalformed},
		{form: url.Values{"MessageSid": {"SM1", "SM2"}, "MessageStatus": {"sent"}}, err: ErrMalformed},
		{form: url.Values{"MessageSid": {"SM 1"}, "MessageStatus": {"sent"}}, err: ErrMalformed},
	}
	tw := newReceiptTwilio(t, StaticSecret(testToken))
	for _, tt := range tests {
		r := twilioReceipt(testToken, receiptURL, tt.form)
		got, err := tw.ReadReceipt(r)
		if tt.err != nil {
			checkReceiptErr(t, err, tt.err, r, testToken)
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: ReadReceipt = %+v, %v; want %+v", tt.form, got, err, tt.want)
		}
	}
}
