package provider

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// checkFuzzedReceipt fails unless ReadReceipt's answer keeps its promises:
// an error is ErrForged or ErrMalformed and shows no secret; a report came
// from a signed request and is internally valid.
func checkFuzzedReceipt(t *testing.T, d DeliveryReport, err error, signed bool, secret string) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrForged) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ReadReceipt: %v, neither ErrForged nor ErrMalformed", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q shows the secret", err)
		}
		return
	}
	if !signed {
		t.Fatalf("an unsigned receipt verified: %+v", d)
	}
	if cerr := checkReport(d); cerr != nil {
		t.Fatalf("verified report %+v is not valid: %v", d, cerr)
	}
}

func FuzzTwilioReceipt(f *testing.F) {
	f.Add([]byte("AccountSid=ACxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx&From=%2B15017250604&MessageSid=SM1342fe1b2c904d1ab04f0fc7a58abca9&MessageStatus=sent&SmsSid=SM1342fe1b2c904d1ab04f0fc7a58abca9&SmsStatus=sent"), "", true)
	f.Add([]byte("MessageSid=SM1&MessageStatus=undelivered&ErrorCode=30007"), "", true)
	f.Add([]byte("MessageSid=SM1&MessageSid=SM2&MessageStatus=delivered"), "", true)
	f.Add([]byte("MessageSid=SM1&MessageStatus=received"), "", true)
	f.Add([]byte("MessageSid=SM1&MessageStatus=delivered"), "vOEb5UThFn24KEfnOFLQY2AE5FY=", false)
	f.Add([]byte("%zz"), "", true)
	tw := newReceiptTwilio(f, StaticSecret(testToken))
	f.Fuzz(func(t *testing.T, body []byte, sig string, sign bool) {
		if sign {
			form, _ := url.ParseQuery(string(body))
			sig = twilioSign(testToken, receiptURL, form)
		}
		d, err := tw.ReadReceipt(ReceiptRequest{URL: receiptURL, Header: header("X-Twilio-Signature", sig), Body: body})
		checkFuzzedReceipt(t, d, err, sign, testToken)
		if err == nil && !d.At.IsZero() {
			t.Fatalf("a Twilio report with a time: %+v", d)
		}
	})
}

func FuzzVonageReceipt(f *testing.F) {
	f.Add([]byte(`{"err-code":"0","message-timestamp":"2018-10-25 12:10:29","messageId":"0B00000127FDBC63","msisdn":"447547232824","network-code":"23410","price":"0.03330000","scts":"1810251310","status":"delivered","to":"Nexmo CLI"}`), true, true, uint8(0))
	f.Add([]byte("messageId=0B00000127FDBC63&status=failed&err-code=6&client-ref=login-7f3a9c&timestamp=1764676800&nonce=n"), false, true, uint8(3))
	f.Add([]byte(`{"messageId":"p1","status":"delivered","timestamp":1764676800}`), true, true, uint8(1))
	f.Add([]byte(`{"messageId":"p1","status":"delivered","sig":"00"}`), true, false, uint8(2))
	f.Add([]byte("messageId=a&messageId=b&status=delivered"), false, true, uint8(4))
	methods := []string{"md5hash", "md5", "sha1", "sha256", "sha512"}
	vs := make([]*Vonage, len(methods))
	for i, m := range methods {
		vs[i] = newReceiptVonage(f, StaticSecret(vonageTestSigSecret), m)
	}
	f.Fuzz(func(t *testing.T, body []byte, asJSON, sign bool, method uint8) {
		i := int(method) % len(methods)
		ct := "application/x-www-form-urlencoded"
		if asJSON {
			ct = "application/json"
		}
		r := ReceiptRequest{URL: receiptURL, Header: header("Content-Type", ct), Body: body}
		if sign {
			// Signed as Vonage would sign what the body holds, and sent
			// again in the same form.
			p, err := vonageParams(r)
			if err != nil {
				return
			}
			p["sig"] = vonageSign(methods[i], vonageTestSigSecret, p)
			r = vonageDLR(p, asJSON)
		}
		d, err := vs[i].ReadReceipt(r)
		checkFuzzedReceipt(t, d, err, sign, vonageTestSigSecret)
	})
}

func FuzzClientReceipt(f *testing.F) {
	f.Add([]byte(`{"id":"p-1","client_ref":"login-7f3a9c","status":"delivered","timestamp":"2026-12-02T12:05:07.25Z"}`), "", true)
	f.Add([]byte(`{"id":"p-1","status":"undelivered","error_code":"30007"}`), "", true)
	f.Add([]byte(`{"id":"p-1","status":"read"}`), "", true)
	f.Add([]byte(`{"id":"p-1","status":"sent","timestamp":"2026-12-02 12:05"}`), "", true)
	f.Add([]byte(`{"id":"p-1","status":"delivered"}`), "sha256=00", false)
	c := newReceiptClient(f, StaticSecret(testReceiptSecret))
	f.Fuzz(func(t *testing.T, body []byte, sig string, sign bool) {
		if sign {
			sig = clientSign(testReceiptSecret, body)
		}
		d, err := c.ReadReceipt(ReceiptRequest{URL: receiptURL, Header: header("X-Signature", sig), Body: body})
		checkFuzzedReceipt(t, d, err, sign, testReceiptSecret)
	})
}
