package provider

import (
	"fmt"
	"net/url"
	"testing"
)

// TestOnlyRouteCodesAreRouteFailures: of each provider's final failures,
// only those whose code names the route (a carrier's filter, no route)
// are RouteFailed; a handset's, a number's or a recipient's code is not,
// nor is a failure without a code or a delivered message.
func TestOnlyRouteCodesAreRouteFailures(t *testing.T) {
	tests := []struct {
		provider, status, code string
		want                   bool
	}{
		{"twilio", "undelivered", "30007", true}, // filtered by the carrier
		{"twilio", "undelivered", "30017", true},
		{"twilio", "failed", "30024", true},
		{"twilio", "undelivered", "30003", false}, // the handset is off
		{"twilio", "undelivered", "30004", false}, // the recipient blocked it
		{"twilio", "undelivered", "30005", false}, // no such number
		{"twilio", "undelivered", "30006", false}, // a landline
		{"twilio", "failed", "21211", false},      // an invalid To
		{"twilio", "undelivered", "30008", false}, // unknown
		{"twilio", "undelivered", "", false},
		{"twilio", "sent", "30007", false}, // not final
		{"vonage", "rejected", "6", true},  // the carrier's anti-spam filter
		{"vonage", "failed", "8", true},
		{"vonage", "failed", "11", true},
		{"vonage", "failed", "1", false},  // unknown
		{"vonage", "expired", "2", false}, // absent subscriber
		{"vonage", "failed", "3", false},
		{"vonage", "failed", "4", false},
		{"vonage", "failed", "9", false},
		{"vonage", "failed", "12", false},
		{"vonage", "rejected", "14", false},
		{"generic", "undelivered", "30007", true},
		{"generic", "failed", "30003", false},
		{"generic", "undelivered", "", false},
		{"generic", "delivered", "30007", false},
	}
	tw := newReceiptTwilio(t, StaticSecret(testToken))
	v := newReceiptVonage(t, StaticSecret(vonageTestSigSecret), "")
	c := newReceiptClient(t, StaticSecret(testReceiptSecret))
	for _, tt := range tests {
		var r ReceiptRequest
		var reader ReceiptReader
		switch tt.provider {
		case "twilio":
			form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {tt.status}}
			if tt.code != "" {
				form.Set("ErrorCode", tt.code)
			}
			r, reader = twilioReceipt(testToken, receiptURL, form), tw
		case "vonage":
			r, reader = vonageReceipt("md5hash", vonageTestSigSecret, map[string]string{"messageId": "p1", "status": tt.status, "err-code": tt.code}, false), v
		case "generic":
			r, reader = clientReceiptRequest(testReceiptSecret, fmt.Sprintf(`{"id":"p-1","status":%q,"error_code":%q}`, tt.status, tt.code)), c
		}
		got, err := reader.ReadReceipt(r)
		if err != nil || got.RouteFailed != tt.want {
			t.Errorf("%s %s %q: RouteFailed %t (%v), want %t", tt.provider, tt.status, tt.code, got.RouteFailed, err, tt.want)
		}
	}
}
