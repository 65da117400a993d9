package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"smsdispatcher/provider"
	"smsdispatcher/provider/internal/wire"
)

// NewVonage returns a Simulator that speaks Vonage's SMS API (see
// provider/vonage.go for the sources): POST /sms/json, a form with api_key (apiKey;
// empty accepts any), api_secret (cfg.Token, replaced by SetToken; empty
// accepts any), from, to (7 to 15 digits, no '+'), text, type (text or
// unicode; unicode is required for a body that is not GSM-7), client-ref
// (at most 100 characters), ttl (20000 to 604800000) and callback (at most
// 100 characters: where the parts' delivery receipts are posted, see
// ReceiptConfig; a longer one is status 23). The credentials
// may come as HTTP Basic instead, as the current reference documents.
//
// Every answer Vonage documents is a 200 with a status per part; the
// statuses are those of vonageStatuses. A throttle is a 200 with status
// "1" and no Retry-After header, so Config.RetryAfter and
// ThrottleNext's retryAfter are not sent. The rate counts what Vonage
// bills: with CountSegments, a message counts its parts, in UCS-2 when
// type is unicode. With SenderLimit, the sender is from. Arrival.Status
// keeps the generic API's status for each answer, not the 200 on the wire.
func NewVonage(cfg Config, apiKey string, opts ...Option) *Simulator {
	return newSimulator(cfg, vonageDialect{apiKey: apiKey}, opts...)
}

// vonageStatus is a status and error-text of Vonage's answer.
type vonageStatus struct{ status, text string }

// vonageStatuses is what the Vonage simulator answers in a 200, by what
// it decided. Source: https://developer.vonage.com/en/api-errors/sms.
var vonageStatuses = struct {
	throttled, suspended, internal, badCredentials vonageStatus
	missing, invalid, refusedNumber, badCallback   vonageStatus
}{
	// Over the rate, or ThrottleNext.
	throttled: vonageStatus{"1", "Throttled"},
	// Suspended by the Simulator: to a client this is an account that
	// cannot send, as a barred account cannot.
	suspended: vonageStatus{"8", "Partner Account Barred"},
	// FailFor(500): "an error has occurred in the platform whilst
	// processing this message". FailFor with any other status answers that
	// HTTP status itself, as a gateway in front of the API would (502, 503,
	// 504), or to exercise a client's handling of 429, 401 or 403.
	internal: vonageStatus{"5", "Internal Error"},
	// A wrong or missing api_key or api_secret.
	badCredentials: vonageStatus{"4", "Bad Credentials"},
	// No form, or no from, to or text.
	missing: vonageStatus{"2", "Missing Parameters"},
	// A to that is not 7 to 15 digits, an unknown type, a body that is not
	// GSM-7 without type=unicode (which the reference requires; refused
	// here so the mistake shows, whatever Vonage would make of it), a
	// client-ref over 100 characters, a ttl out of range.
	invalid: vonageStatus{"3", "Invalid Parameters"},
	// RefuseNumber: a demo account may send only to its whitelisted
	// numbers, the per-number refusal a test account meets.
	refusedNumber: vonageStatus{"29", "Non-Whitelisted Destination"},
	// A callback over vonageCallbackMax characters.
	badCallback: vonageStatus{"23", "Invalid Callback URL"},
}

// vonageCallbackMax is the longest callback Vonage takes: "Callback URL
// is too long" (status 23) past 100 characters.
const vonageCallbackMax = 100

// The body faults vonageDialect.read finds, passed through the core as
// answer.status (and kept as Arrival.Status, the generic reading).
const (
	vonageFaultMissing = http.StatusBadRequest          // vonageStatuses.missing
	vonageFaultInvalid = http.StatusUnprocessableEntity // vonageStatuses.invalid
)

// vonageEcho is what read learned that write needs (request.echo): the
// parts, number and client-ref an acceptance echoes.
type vonageEcho struct {
	parts       int
	to          string
	ref         []string // one element when the request had a client-ref
	badCallback bool     // refused for its callback
}

// vonageDialect is Vonage's SMS API.
type vonageDialect struct{ apiKey string }

// messageID returns a 16-character id in the style of Vonage's examples
// ("0A0000000123ABCD1" is one of 17: the id and a part number).
func (vonageDialect) messageID(n int) string { return fmt.Sprintf("0A%014X", n) }

func (d vonageDialect) read(w http.ResponseWriter, r *http.Request, token string) request {
	var in request
	body, err := readRouted(w, r, r.URL.Path == "/sms/json", &in)
	var tooBig *http.MaxBytesError
	switch {
	case in.routeFault != 0:
		return in
	case errors.As(err, &tooBig):
		in.routeFault = http.StatusRequestEntityTooLarge
		return in
	}
	var form url.Values
	if mt, _, merr := mime.ParseMediaType(r.Header.Get("Content-Type")); merr == nil &&
		mt == "application/x-www-form-urlencoded" && err == nil {
		form, _ = url.ParseQuery(string(body)) // keeps what parses
	}
	in.id = form.Get("client-ref")
	in.authorized = d.authorized(r, form, token)
	if !in.authorized {
		return in
	}
	from, to, text := form.Get("from"), form.Get("to"), form.Get("text")
	in.from = from
	if from == "" || to == "" || text == "" {
		in.bodyFault = vonageFaultMissing
		return in
	}
	n, enc := provider.Segments(text)
	switch form.Get("type") {
	case "", "text":
		if enc != provider.GSM7 {
			in.bodyFault = vonageFaultInvalid
			return in
		}
	case "unicode":
		n = provider.UCS2Segments(text)
	default: // binary and the rest: not simulated
		in.bodyFault = vonageFaultInvalid
		return in
	}
	if len(to) < 7 || len(to) > 15 || !wire.AllDigits(to) ||
		utf8.RuneCountInString(in.id) > wire.VonageClientRefMax || !vonageTTLValid(form) {
		in.bodyFault = vonageFaultInvalid
		return in
	}
	if cb := form.Get("callback"); utf8.RuneCountInString(cb) > vonageCallbackMax {
		in.bodyFault = vonageFaultInvalid
		in.echo = vonageEcho{badCallback: true}
		return in
	}
	in.to, in.segments, in.callback, in.ref = "+"+to, n, form.Get("callback"), in.id
	e := vonageEcho{parts: n, to: to}
	if _, ok := form["client-ref"]; ok {
		e.ref = []string{in.id}
	}
	in.echo = e
	return in
}

// authorized checks api_key and api_secret in the form or, when the form
// has no api_key, HTTP Basic.
func (d vonageDialect) authorized(r *http.Request, form url.Values, token string) bool {
	key, secret, ok := form.Get("api_key"), form.Get("api_secret"), form.Has("api_key")
	if !ok {
		key, secret, ok = r.BasicAuth()
	}
	return ok && (d.apiKey == "" || secretEqual(key, d.apiKey)) &&
		(token == "" || secretEqual(secret, token))
}

// vonageTTLValid reports whether the form has no ttl or one in range.
func vonageTTLValid(form url.Values) bool {
	if !form.Has("ttl") {
		return true
	}
	ttl, err := strconv.ParseInt(form.Get("ttl"), 10, 64)
	return err == nil && ttl >= wire.VonageTTLMin && ttl <= wire.VonageTTLMax
}

// vonagePart is one entry of messages (schemas Message and ErrorMessage).
type vonagePart struct {
	To               string  `json:"to,omitempty"`
	MessageID        string  `json:"message-id,omitempty"`
	Status           string  `json:"status"`
	ErrorText        string  `json:"error-text,omitempty"`
	RemainingBalance string  `json:"remaining-balance,omitempty"`
	MessagePrice     string  `json:"message-price,omitempty"`
	Network          string  `json:"network,omitempty"`
	ClientRef        *string `json:"client-ref,omitempty"`
}

func (vonageDialect) write(w http.ResponseWriter, a answer) {
	h := w.Header()
	e, _ := a.echo.(vonageEcho)
	parts, to, ref := e.parts, e.to, e.ref

	var st vonageStatus
	switch a.outcome {
	case outAccepted, outDuplicate:
		var clientRef *string
		if len(ref) > 0 {
			clientRef = &ref[0]
		}
		msgs := make([]vonagePart, max(parts, 1))
		for i := range msgs {
			msgs[i] = vonagePart{
				To:               to,
				MessageID:        vonagePartID(a.messageID, i),
				Status:           "0",
				RemainingBalance: "3.14159265",
				MessagePrice:     "0.03330000",
				Network:          "12345",
				ClientRef:        clientRef,
			}
		}
		vonageWrite(w, http.StatusOK, msgs)
		return
	case outThrottled:
		st = vonageStatuses.throttled
	case outSuspended:
		st = vonageStatuses.suspended
	case outUnauthorized:
		st = vonageStatuses.badCredentials
	case outFailed:
		if a.status != http.StatusInternalServerError {
			if a.status == http.StatusTooManyRequests && a.retryAfter >= 0 {
				h.Set("Retry-After", wire.FormatSeconds(a.retryAfter))
			}
			vonageWrite(w, a.status, nil)
			return
		}
		st = vonageStatuses.internal
	default: // outRefused
		switch {
		case a.badNumber:
			st = vonageStatuses.refusedNumber
		case a.status == vonageFaultMissing:
			st = vonageStatuses.missing
		case a.status == vonageFaultInvalid && e.badCallback:
			st = vonageStatuses.badCallback
		case a.status == vonageFaultInvalid:
			st = vonageStatuses.invalid
		default: // 404, 405, 413: no Vonage status for a request that never reached the API
			if a.status == http.StatusMethodNotAllowed {
				h.Set("Allow", http.MethodPost)
			}
			vonageWrite(w, a.status, nil)
			return
		}
	}
	vonageWrite(w, http.StatusOK, []vonagePart{{Status: st.status, ErrorText: st.text}})
}

// vonageWrite writes status and, when msgs is not nil, the SMS API's JSON
// answer holding them; otherwise a body with the status text alone.
func vonageWrite(w http.ResponseWriter, status int, msgs []vonagePart) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	if msgs == nil {
		b, _ = json.Marshal(map[string]string{"error": http.StatusText(status)})
	} else {
		b, _ = json.Marshal(struct {
			Count    string       `json:"message-count"`
			Messages []vonagePart `json:"messages"`
		}{strconv.Itoa(len(msgs)), msgs})
	}
	w.Write(append(b, '\n'))
}
