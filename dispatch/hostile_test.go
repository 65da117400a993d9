package dispatch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/nack"
)

// pstestMaxData is the largest data pstest takes, about: its gRPC server
// keeps gRPC's default 4 MiB limit on a request, where Pub/Sub takes 10 MB.
// The hostile payload stays 64 KiB under it so that its dead letter (the
// same data plus three attributes) fits the same limit.
const pstestMaxData = 4<<20 - 64<<10

// TestHostileMessagesAreDeadLetteredOnce publishes messages a broken or
// hostile producer could send. Each must end dead-lettered with a
// reject_reason in exactly one delivery (no loop), none reaches the
// provider, and the process survives them all.
func TestHostileMessagesAreDeadLetteredOnce(t *testing.T) {
	const to = `"+819012345678"`
	nested := func(depth int) string {
		return `{"to":` + to + `,"body":"hi","x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	}
	tests := []struct {
		name   string
		class  admission.Class
		data   string
		attrs  map[string]string
		reason string // the InvalidError reason
	}{
		{"invalid UTF-8 in the body", admission.OTP, `{"to":` + to + `,"body":"` + "\xff\xfe\xfd" + `"}`, nil, "bad_json"},
		{"invalid UTF-8 in an unknown field", admission.Marketing, `{"to":` + to + `,"body":"hi","x":"` + "\xc0\x80" + `"}`, nil, "bad_json"},
		{"lone surrogate escape", admission.OTP, `{"to":` + to + `,"body":"\ud800"}`, nil, ""}, // valid JSON: decodes to U+FFFD, see below
		{"4 MiB data", admission.Marketing, `{"to":` + to + `,"body":"hi","pad":"` + strings.Repeat("a", pstestMaxData-40) + `"}`, nil, "too_large"},
		{"100k nested arrays", admission.OTP, nested(100_000), nil, "too_large"},
		{"30k nested arrays under 64 KiB", admission.OTP, nested(30_000), nil, "bad_json"},
		{"nested objects", admission.Marketing, `{"to":` + to + `,"body":"hi","x":` + strings.Repeat(`{"a":`, 10_500) + "1" + strings.Repeat("}", 10_500) + `}`, nil, "bad_json"},
		{"NUL in to", admission.OTP, `{"to":"+8190123\u00005678","body":"hi"}`, nil, "bad_to"},
		{"newline after to", admission.OTP, `{"to":"+819012345678\n","body":"hi"}`, nil, "bad_to"},
		{"raw control byte in to", admission.OTP, "{\"to\":\"+8190\x01\x0212345678\",\"body\":\"hi\"}", nil, "bad_json"},
		{"right-to-left override in to", admission.OTP, `{"to":"\u202e+819012345678","body":"hi"}`, nil, "bad_to"},
		{"fullwidth digits in to", admission.OTP, `{"to":"+８１９０１２３４５６７８","body":"hi"}`, nil, "bad_to"},
		{"to is a number", admission.OTP, `{"to":819012345678,"body":"hi"}`, nil, "bad_json"},
		{"to is a huge number", admission.OTP, `{"to":1e400,"body":"hi"}`, nil, "bad_json"},
		{"to is an array", admission.OTP, `{"to":[` + to + `],"body":"hi"}`, nil, "bad_json"},
		{"to is null", admission.OTP, `{"to":null,"body":"hi"}`, nil, "bad_to"},
		{"body is a number", admission.Marketing, `{"to":` + to + `,"body":482913}`, nil, "bad_json"},
		{"body is an object", admission.Marketing, `{"to":` + to + `,"body":{"text":"hi"}}`, nil, "bad_json"},
		{"id is a number", admission.OTP, `{"id":7,"to":` + to + `,"body":"hi"}`, nil, "bad_json"},
		{"id with control characters", admission.OTP, `{"id":"a\u0000b","to":` + to + `,"body":"hi"}`, nil, "bad_id"},
		{"deadline is a number", admission.OTP, `{"to":` + to + `,"body":"hi","deadline":1700000000}`, nil, "bad_json"},
		{"duplicate to, second bad", admission.OTP, `{"to":` + to + `,"to":"x","body":"hi"}`, nil, "duplicate_field"},
		{"forged reject_reason and odd attributes", admission.Marketing, `{"to":"nope","body":"hi"}`, map[string]string{
			attr.RejectReason: "forged", attr.OriginalMessageID: "forged", attr.Class: "otp",
			"traceparent": "00-zz-zz-zz", "googclient_deliveryattempt": "-7",
			"ключ": strings.Repeat("я", 500), "x": "\u0000\u202e",
		}, "bad_to"},
	}
	h := newHarness(t, strict, nil)
	ids := make([]string, len(tests))
	want := map[string]int{} // Pub/Sub ID -> index in tests
	for i, tt := range tests {
		id, err := h.pubs[tt.class].Publish(context.Background(), &pubsub.Message{Data: []byte(tt.data), Attributes: tt.attrs}).Get(context.Background())
		if err != nil {
			t.Fatalf("%s: publish: %v", tt.name, err)
		}
		ids[i], want[id] = id, i
	}
	var logs bytes.Buffer // written under the handler's lock; read once stop has returned
	stop := h.start(1, Config{Logger: debugLogger(&logs)})
	ended := h.waitEnded(ids, 60*time.Second)
	stop()
	checkLogs(t, logs.String(), "9012345678", "482913", `"hi"`)

	for id, ev := range ended {
		tt := tests[want[id]]
		if tt.reason == "" {
			continue // checked below
		}
		var inv *InvalidError
		if ev.Outcome != nack.Invalid || ev.Action != nack.DeadLetter || !errors.As(ev.Err, &inv) || inv.Reason != tt.reason {
			t.Errorf("%s: %v/%v (%v), want invalid %s and dead-lettered", tt.name, ev.Outcome, ev.Action, ev.Err, tt.reason)
		}
		if n := len(h.eventsOf(id)); n != 1 {
			t.Errorf("%s: %d deliveries, want exactly one", tt.name, n)
		}
	}

	// "\ud800" is valid JSON that Go decodes to U+FFFD: a one-character
	// body, so the message is sent, once.
	surrogate := ended[ids[2]]
	if surrogate.Outcome != nack.Sent || h.sim.SentCount(surrogate.ID) != 1 {
		t.Errorf("lone surrogate: %v (%v), sent %d times; want sent once", surrogate.Outcome, surrogate.Err, h.sim.SentCount(surrogate.ID))
	}
	if st := h.sim.Stats(); st.Accepted != 1 || st.Rejected+st.Throttled+st.Failed+st.Duplicates != 0 {
		t.Errorf("simulator %+v: want only the one valid message accepted", st)
	}

	reasons := map[string]*pubsub.Message{}
	for _, m := range h.deadLetters(len(tests) - 1) {
		reasons[m.Attributes[attr.OriginalMessageID]] = m
	}
	for i, tt := range tests {
		if tt.reason == "" {
			continue
		}
		m := reasons[ids[i]]
		if m == nil {
			t.Errorf("%s: no dead letter names original_message_id %s", tt.name, ids[i])
			continue
		}
		r := m.Attributes[attr.RejectReason]
		if !strings.HasPrefix(r, "invalid: "+tt.reason) || len(r) > nack.MaxRejectReasonLen || !utf8.ValidString(r) {
			t.Errorf("%s: reject_reason %q, want invalid: %s, valid UTF-8, at most %d bytes", tt.name, r, tt.reason, nack.MaxRejectReasonLen)
		}
		if strings.Contains(r, "9012345678") {
			t.Errorf("%s: reject_reason %q holds the number", tt.name, r)
		}
		// The dead letter keeps the data for people to inspect, cut to
		// MaxDataBytes at most (data over it can never be sent).
		if !strings.HasPrefix(tt.data, string(m.Data)) || len(m.Data) < min(len(tt.data), MaxDataBytes) {
			t.Errorf("%s: dead letter holds %d bytes of data, want the original %d (or its first %d)", tt.name, len(m.Data), len(tt.data), MaxDataBytes)
		}
	}
	forged := reasons[ids[len(ids)-1]]
	if forged != nil && (forged.Attributes[attr.Class] != "marketing" || forged.Attributes["ключ"] != strings.Repeat("я", 500)) {
		t.Errorf("forged attributes: class %q, producer attribute kept %v; want the dispatcher's class and the producer's other attributes",
			forged.Attributes[attr.Class], forged.Attributes["ключ"] != "")
	}
}

// TestOddAttributesDoNotStopAValidMessage: attributes are the producer's
// (docs/contract.md section 2 judges the data only), so a valid message with a
// garbage traceparent, a forged reject_reason or a delivery-attempt
// look-alike is sent, once, and not dead-lettered.
func TestOddAttributesDoNotStopAValidMessage(t *testing.T) {
	h := newHarness(t, strict, nil)
	attrs := map[string]string{
		"traceparent": "00-" + strings.Repeat("f", 32) + "-" + strings.Repeat("0", 16) + "-ff", "tracestate": strings.Repeat(",", 500),
		attr.RejectReason: "forged", "googclient_deliveryattempt": "NaN", "x-big": strings.Repeat("v", 1024),
	}
	for i := range 90 { // Pub/Sub allows 100 attributes per message
		attrs["k"+strconv.Itoa(i)] = ""
	}
	id, err := h.pubs[admission.OTP].Publish(context.Background(), &pubsub.Message{
		Data: []byte(`{"id":"odd-attrs","to":"+819012345678","body":"odd-attrs-body"}`), Attributes: attrs,
	}).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	stop := h.start(1, Config{Logger: debugLogger(&logs)})
	ev := h.waitEnded([]string{id}, 30*time.Second)[id]
	stop()
	checkLogs(t, logs.String(), "9012345678", "odd-attrs-body")
	if ev.Outcome != nack.Sent || ev.Action != nack.Ack || len(h.eventsOf(id)) != 1 {
		t.Fatalf("%v/%v (%v) in %d deliveries, want sent and acked once", ev.Outcome, ev.Action, ev.Err, len(h.eventsOf(id)))
	}
	if n := h.sim.SentCount("odd-attrs"); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
}

// debugLogger logs every level as JSON to w.
func debugLogger(w *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// checkLogs fails the test if the dispatcher's logs hold any of secrets: a
// phone number in clear or a body (docs/design.md, conventions).
func checkLogs(t *testing.T, logs string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the dispatcher's logs hold %q:\n%s", s, logs)
		}
	}
}

// TestADeadLetterKeepsNoneOfTheProducersReservedAttributes: a producer's
// attributes named as the dispatcher's or Pub/Sub's on a dead letter
// (deadletter reserves them) would steer its replay: a class sends it to the other
// topic, an original_data_bytes makes it look cut (never replayed), a
// source subscription makes it look forwarded by Pub/Sub. The dead letter
// carries the dispatcher's, and the producer's other attributes.
func TestADeadLetterKeepsNoneOfTheProducersReservedAttributes(t *testing.T) {
	h := newHarness(t, strict, nil)
	pub := h.admin.Publisher("sms-dead-letter")
	defer pub.Stop()
	m := &pubsub.Message{ID: "m1", Data: []byte(`{"to":"nope","body":"sale"}`), Attributes: map[string]string{
		attr.Class: "otp", attr.RejectReason: "forged", attr.OriginalMessageID: "forged", attr.OriginalDataBytes: "70000",
		attr.PubSubPrefix + "SourceSubscription": "projects/test/subscriptions/sms-otp-dispatcher",
		"keep":                                   "1",
	}}
	if err := (DeadLetterTopic{Publisher: pub}).DeadLetter(context.Background(), m, admission.Marketing, "invalid: bad_to: x"); err != nil {
		t.Fatal(err)
	}
	got := h.deadLetters(1)[0].Attributes
	want := map[string]string{attr.Class: "marketing", attr.RejectReason: "invalid: bad_to: x", attr.OriginalMessageID: "m1", "keep": "1"}
	if !maps.Equal(got, want) {
		t.Fatalf("dead letter attributes %v, want %v", got, want)
	}
}
