package deadletter

import (
	"maps"
	"strconv"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
)

func TestDeadlettersMaskNumber(t *testing.T) {
	// maskNumber is a number as the list's table shows it.
	maskNumber := func(to string, ok bool) string { return dash((&Letter{to: to, hasTo: ok}).MaskedTo()) }
	for _, tt := range []struct {
		to   string
		ok   bool
		want string
	}{
		{"+819012345678", true, "+********5678"},
		{"+15551234567", true, "+*******4567"},
		{"12", true, "**"},
		{"123456", true, "******"},
		{"", true, "-"},
		{"+81", false, "-"},
		{"+1234567890123456789012345", true, "+***************2345"},
	} {
		if got := maskNumber(tt.to, tt.ok); got != tt.want {
			t.Errorf("maskNumber(%q) = %q, want %q", tt.to, got, tt.want)
		}
	}
}

// TestADeadLetterSaysItsClassByWhoMadeIt: a letter that a subscription's
// dead-letter policy forwarded carries the producer's attributes as they
// were, so its class is its source subscription's, whatever a class
// attribute says, and a reason, an original message ID or a cut size among
// them is not believed; a letter the dispatcher made (it sets those over
// the producer's) is read by its attributes.
func TestADeadLetterSaysItsClassByWhoMadeIt(t *testing.T) {
	sources := []Source{{"sms-otp-dispatcher", admission.OTP}, {"sms-marketing-dispatcher", admission.Marketing}}
	producers := map[string]string{attr.Class: "otp", attr.RejectReason: "forged", attr.OriginalMessageID: "forged-id", "original_data_bytes": "70000", "keep": "1"}
	with := func(more ...string) map[string]string {
		a := maps.Clone(producers)
		for i := 0; i+1 < len(more); i += 2 {
			a[more[i]] = more[i+1]
		}
		return a
	}
	tests := []struct {
		name      string
		attrs     map[string]string
		class     string
		reason    string
		origID    string
		truncated bool
	}{
		{"forwarded from the marketing subscription", with(sourceSubscriptionAttr, "projects/p/subscriptions/sms-marketing-dispatcher"), "marketing", "", "", false},
		{"forwarded from another subscription", with(sourceSubscriptionAttr, "projects/p/subscriptions/elsewhere"), "", "", "", false},
		{"made by the dispatcher", map[string]string{attr.Class: "otp", attr.RejectReason: "invalid: bad_to: x", attr.OriginalMessageID: "1001", "original_data_bytes": "70000"}, "otp", "invalid: bad_to: x", "1001", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dl := Parse(&pubsubpb.PubsubMessage{MessageId: "9", Data: []byte(`{"body":"sale","to":"+819012345678"}`), Attributes: tt.attrs}, sources)
			if dl.Class != tt.class || dl.Reason != tt.reason || dl.OriginalID != tt.origID || dl.Truncated != tt.truncated {
				t.Errorf("class %q, reason %q, original %q, truncated %v; want %q, %q, %q, %v",
					dl.Class, dl.Reason, dl.OriginalID, dl.Truncated, tt.class, tt.reason, tt.origID, tt.truncated)
			}
		})
	}
}

// TestParseReadsWhatNewWrote: the reader reads the writer's attributes
// back, and a producer's attribute of a reserved name is the writer's.
func TestParseReadsWhatNewWrote(t *testing.T) {
	m := &pubsub.Message{ID: "m1", Data: []byte(`{"to":"+819012345678","body":"hello, world"}`),
		Attributes: map[string]string{attr.Class: "otp", attr.OriginalDataBytes: "70000", attr.Replays: "2", "team": "auth"}}
	dl := New(m, admission.Marketing, "invalid: too_large: x", 16)
	l := Parse(&pubsubpb.PubsubMessage{MessageId: "d1", Data: dl.Data, Attributes: dl.Attributes}, nil)
	if l.Class != "marketing" || l.Reason != "invalid: too_large: x" || l.OriginalID != "m1" || !l.Truncated || l.Replays != 2 {
		t.Errorf("read %+v, want marketing, the reason, m1, truncated, 2 replays", l)
	}
	if got := l.Attributes[attr.OriginalDataBytes]; got != strconv.Itoa(len(m.Data)) || len(l.Data) != 16 || l.Attributes["team"] != "auth" {
		t.Errorf("original_data_bytes %q, %d bytes of data, team %q; want %d, 16, auth", got, len(l.Data), l.Attributes["team"], len(m.Data))
	}
}

// TestAForwardedLetterOfTwoMatchingSourcesIsOTP: when both subscriptions'
// names match the source (one given by ID, one by full path), the class
// is the earlier one's in priority order, OTP's.
func TestAForwardedLetterOfTwoMatchingSourcesIsOTP(t *testing.T) {
	sources := []Source{{"sms", admission.OTP}, {"projects/p/subscriptions/sms", admission.Marketing}}
	m := &pubsubpb.PubsubMessage{Attributes: map[string]string{sourceSubscriptionAttr: "projects/p/subscriptions/sms"}}
	for range 50 {
		if got := Parse(m, sources).Class; got != "otp" {
			t.Fatalf("class %q, want otp", got)
		}
	}
}
