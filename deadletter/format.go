package deadletter

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/provider"
)

// A dead letter's attributes, which the dispatcher sets over the
// producer's (docs/levers.md, "Dead letters"), are named in
// internal/attr, which the dispatcher reads too.

// sourceSubscriptionAttr names the subscription a letter that Pub/Sub's
// dead-letter policy forwarded came from.
const sourceSubscriptionAttr = attr.PubSubPrefix + "SourceSubscription"

// maxAttributes is Pub/Sub's limit of attributes per message.
const maxAttributes = 100

// reserved reports whether a dead letter's attribute named k says what the
// dispatcher (reject_reason, class, original_message_id,
// original_data_bytes) or Pub/Sub (attr.PubSubPrefix...) made of the
// message: a producer's attribute of that name is not copied into a dead
// letter, where it would steer what a replay does with it.
func reserved(k string) bool {
	switch k {
	case attr.RejectReason, attr.Class, attr.OriginalMessageID, attr.OriginalDataBytes:
		return true
	}
	return strings.HasPrefix(k, attr.PubSubPrefix)
}

// New returns the dead letter of m, which will never be sent for reason:
// m's data and attributes with reject_reason, class and
// original_message_id added. Data over maxData (never sendable) is cut to
// maxData, with original_data_bytes added. Producer attributes of a
// reserved name (reserved) are dropped, and so are those beyond what
// Pub/Sub takes with the added ones (in key order): a dead letter that did
// not fit its topic would be nacked and redelivered for ever.
func New(m *pubsub.Message, class admission.Class, reason string, maxData int) *pubsub.Message {
	attrs := make(map[string]string, len(m.Attributes)+4)
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(m.Attributes)), reserved)
	for _, k := range keys[:min(len(keys), maxAttributes-4)] {
		attrs[k] = m.Attributes[k]
	}
	data := m.Data
	if len(data) > maxData {
		data = data[:maxData]
		attrs[attr.OriginalDataBytes] = strconv.Itoa(len(m.Data))
	}
	attrs[attr.RejectReason] = reason
	attrs[attr.Class] = class.String()
	attrs[attr.OriginalMessageID] = m.ID
	return &pubsub.Message{Data: data, Attributes: attrs}
}

// Letter is one dead letter as read, and what it says. Its number is
// shown masked (MaskedTo); only Data holds it as the producer wrote it.
type Letter struct {
	MessageID  string    // the dead letter's own Pub/Sub message ID
	Published  time.Time // its publish time, UTC
	Data       []byte
	Attributes map[string]string // never nil

	OriginalID string // original_message_id, "" when absent
	ID         string // the message's id: its data's, else the stand-in; "" when the data is no JSON object
	Class      string // otp, marketing, or "" when unknown
	Reason     string // reject_reason, "" when absent
	Replays    int
	Truncated  bool // original_data_bytes is set: the data was cut

	dataID  bool // the data carries an id
	to      string
	hasTo   bool
	body    string
	hasBody bool
}

// A Source is one of the dispatcher's subscriptions, an ID or a full
// path, and the class it pulls.
type Source struct {
	Subscription string
	Class        admission.Class
}

// Parse reads what a dead letter says. Its data is read leniently, by the
// field names dispatch.Decode reads, so that the id and the number of a
// malformed message still show. sources gives the class of each of the
// dispatcher's subscriptions (an ID, or a full path), in priority order: a
// letter that a subscription's dead-letter policy forwarded takes the
// class of the one it came from.
func Parse(m *pubsubpb.PubsubMessage, sources []Source) *Letter {
	l := &Letter{MessageID: m.GetMessageId(), Data: m.GetData(), Attributes: m.GetAttributes()}
	if t := m.GetPublishTime(); t != nil {
		l.Published = t.AsTime().UTC()
	}
	if l.Attributes == nil {
		l.Attributes = map[string]string{}
	}
	l.Replays, _ = strconv.Atoi(l.Attributes[attr.Replays]) // absent or unreadable: 0
	l.Replays = max(l.Replays, 0)
	if src, forwarded := l.Attributes[sourceSubscriptionAttr]; forwarded {
		// Forwarded by a subscription's dead-letter policy, with the
		// producer's attributes as they were: a class or a reason among
		// them is the producer's word. The subscription says the class.
		// In priority order: the class of a name two subscriptions
		// match is the same on every run, the earlier one's.
		for _, s := range sources {
			if sub := s.Subscription; sub != "" && (src == sub || strings.HasSuffix(src, "/"+sub)) {
				l.Class = s.Class.String()
				break
			}
		}
	} else {
		// Made by the dispatcher, which sets these over the producer's.
		l.Class = l.Attributes[attr.Class]
		l.OriginalID = l.Attributes[attr.OriginalMessageID]
		l.Reason = l.Attributes[attr.RejectReason]
		_, l.Truncated = l.Attributes[attr.OriginalDataBytes]
	}
	if _, err := admission.ParseClass(l.Class); err != nil {
		l.Class = ""
	}

	// By exact name, as dispatch.Decode reads them ("To" is another field).
	var w map[string]json.RawMessage
	trimmed := bytes.TrimSpace(l.Data)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &w) != nil {
		return l
	}
	str := func(raw json.RawMessage) (string, bool) {
		var s *string
		if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s == nil {
			return "", false
		}
		return *s, true
	}
	l.ID, l.dataID = str(w["id"])
	if !l.dataID {
		l.ID = l.standInID()
	}
	l.to, l.hasTo = str(w["to"])
	l.body, l.hasBody = str(w["body"])
	return l
}

// standInID is the id of a message whose data has none: the Pub/Sub
// message ID of the original, as the dispatcher took it (contract section
// 2), or, for a dead letter that does not name it, its own.
func (l *Letter) standInID() string {
	if l.OriginalID != "" {
		return l.OriginalID
	}
	return l.MessageID
}

// MaskedTo is the message's number as provider.MaskNumber shows it, with
// control characters as spaces; "" when it has none.
func (l *Letter) MaskedTo() string {
	if !l.hasTo || l.to == "" {
		return ""
	}
	return printable(provider.MaskNumber(l.to))
}

// BodyChars is the body's length in characters, 0 when it has none.
func (l *Letter) BodyChars() int {
	return utf8.RuneCountInString(l.body)
}
