package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"smsdispatcher/provider"
	"smsdispatcher/provider/internal/wire"
)

// twilioMaxBody is the longest Body Twilio accepts, in characters; a
// character outside the Basic Multilingual Plane (an emoji) counts as two.
const twilioMaxBody = 1600

// NewTwilio returns a Simulator that plays Twilio's Messages API
// for the account accountSID, strictly:
//
//   - route: POST /2010-04-01/Accounts/{sid}/Messages.json, else 404 (code
//     20404) or 405 (code 20004, Allow: POST);
//   - credential: HTTP Basic with user accountSID and password cfg.Token
//     (or SetToken's), and {sid} equal to accountSID; else 401 (code 20003,
//     WWW-Authenticate: Basic realm="Twilio API"). An empty token accepts
//     any credential, but not another account's path;
//   - form fields (application/x-www-form-urlencoded; any other type reads
//     as no field, as at Twilio): To present (21604) and E.164 (21211);
//     From or MessagingServiceSid, or both, as Twilio documents (21603);
//     Body non-empty (21602) and at most 1600 characters (21617);
//     ValidityPeriod, if present, an integer from 1 to 36000 (21624). Each
//     is a 400; a request body over 64 KiB is a 413. StatusCallback, if
//     present, is where the message's delivery receipts are posted (see
//     ReceiptConfig).
//
// An accepted message is a 201 with a Message resource: sid "SM" and 32 hex
// digits, status "queued" and num_segments the Segments of Body, or, with a
// MessagingServiceSid, status "accepted" and num_segments "0" (Twilio picks
// the sender later). A throttle is a 429 with code 20429 and Retry-After; a
// suspended account gets 403 with code 20403, the account-level refusal
// Twilio documents for a suspended account, so that a client sees an
// account failure, not a throttle; a number refused by RefuseNumber gets 400
// with code 21211; FailFor's status comes with code 20500 for a 5xx and
// 20429 (and Retry-After) for a 429.
//
// With SenderLimit, the sender is From; a request with a MessagingServiceSid
// and no From counts under the empty sender "". Twilio has no client
// reference: Arrivals have an empty ID, SentCount("") counts every
// acceptance, and HonourIdempotencyKey has no effect. An
// Arrival's Status is the generic API's status for its Outcome (200 for an
// acceptance, 429 for a suspension, 422 for a refused number), not the
// status on the wire; read its Outcome.
func NewTwilio(cfg Config, accountSID string, opts ...Option) *Simulator {
	d := &twilioDialect{accountSID: accountSID}
	s := newSimulator(cfg, d, opts...)
	d.now = s.now
	return s
}

// twilioDialect is Twilio's Messages API (2010-04-01).
type twilioDialect struct {
	accountSID string
	now        func() time.Time // the Simulator's clock; set before serving
}

// twilioEcho is what read learned that write needs (request.echo): the
// Twilio code of a bad request, the fields a 201 echoes.
type twilioEcho struct {
	Code                    int // the Twilio code of a bad request
	To, From, Service, Body string
	Segments                int
}

func (*twilioDialect) messageID(n int) string { return fmt.Sprintf("SM%032x", n) }

func (d *twilioDialect) read(w http.ResponseWriter, r *http.Request, token string) request {
	var in request
	sid, routed := twilioMessagesSID(r.URL.Path)
	body, err := readRouted(w, r, routed, &in)
	if in.routeFault != 0 {
		return in
	}
	in.authorized = secretEqual(sid, d.accountSID) && d.basicMatches(r, token)
	if !in.authorized {
		return in
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		in.bodyFault = http.StatusRequestEntityTooLarge
		return in
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	_ = r.ParseForm() // what parsed before an error is kept; the rest reads as absent
	f := r.PostForm
	e := twilioEcho{
		To: f.Get("To"), From: f.Get("From"), Service: f.Get("MessagingServiceSid"), Body: f.Get("Body"),
	}
	in.from = e.From // through a Messaging Service alone: "", the sender Twilio picks later
	switch vp, hasVP := f["ValidityPeriod"]; {
	case e.To == "":
		e.Code = wire.TwilioToRequired
	case !isE164(e.To):
		e.Code = wire.TwilioInvalidTo
	case e.From == "" && e.Service == "":
		e.Code = wire.TwilioFromRequired
	case e.Body == "":
		e.Code = wire.TwilioBodyRequired
	case twilioBodyLen(e.Body) > twilioMaxBody:
		e.Code = wire.TwilioBodyTooLong
	case hasVP && !twilioValidValidity(vp[0]):
		e.Code = wire.TwilioBadValidityPeriod
	}
	if e.Code != 0 {
		in.bodyFault = http.StatusBadRequest
		in.echo = twilioEcho{Code: e.Code}
		return in
	}
	in.to = e.To
	in.callback = f.Get("StatusCallback")
	in.segments, _ = provider.Segments(e.Body)
	e.Segments = in.segments
	in.echo = e
	return in
}

// twilioMessagesSID returns the {sid} of /2010-04-01/Accounts/{sid}/Messages.json.
func twilioMessagesSID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/2010-04-01/Accounts/")
	if !ok {
		return "", false
	}
	sid, ok := strings.CutSuffix(rest, "/Messages.json")
	if !ok || sid == "" || strings.Contains(sid, "/") {
		return "", false
	}
	return sid, true
}

func (d *twilioDialect) basicMatches(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	user, pass, ok := r.BasicAuth()
	return ok && secretEqual(user, d.accountSID) && secretEqual(pass, token)
}

// twilioValidValidity reports whether v is an integer from 1 to 36000.
func twilioValidValidity(v string) bool {
	if v == "" || len(v) > 9 || !wire.AllDigits(v) {
		return false
	}
	n, _ := strconv.Atoi(v)
	return n >= 1 && n <= wire.TwilioMaxValidity
}

// twilioBodyLen is the length of s in UTF-16 code units, as Twilio counts
// the characters of a Body.
func twilioBodyLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func (d *twilioDialect) write(w http.ResponseWriter, a answer) {
	h := w.Header()
	e, _ := a.echo.(twilioEcho)
	h.Set("Content-Type", "application/json")
	switch a.outcome {
	case outAccepted:
		d.writeMessage(w, a, e)
	case outThrottled:
		twilioRetryAfter(h, a.retryAfter)
		writeTwilioError(w, wire.TwilioTooManyRequests, 0)
	case outSuspended:
		writeTwilioError(w, wire.TwilioForbidden, 0)
	case outFailed:
		switch {
		case a.status == http.StatusTooManyRequests:
			twilioRetryAfter(h, a.retryAfter)
			writeTwilioError(w, wire.TwilioTooManyRequests, 0)
		case a.status >= 500:
			writeTwilioError(w, wire.TwilioInternalError, a.status)
		default:
			writeTwilioError(w, 0, a.status)
		}
	case outUnauthorized:
		h.Set("WWW-Authenticate", `Basic realm="Twilio API"`)
		writeTwilioError(w, wire.TwilioAuthenticate, 0)
	case outRefused:
		switch {
		case a.status == http.StatusNotFound:
			writeTwilioError(w, wire.TwilioNotFound, 0)
		case a.status == http.StatusMethodNotAllowed:
			h.Set("Allow", http.MethodPost)
			writeTwilioError(w, wire.TwilioMethodNotAllowed, 0)
		case a.badNumber:
			writeTwilioError(w, wire.TwilioInvalidTo, 0)
		case a.optedOut:
			writeTwilioError(w, wire.TwilioUnsubscribed, 0)
		case a.status == http.StatusBadRequest && e.Code != 0:
			writeTwilioError(w, e.Code, 0)
		default: // 413
			writeTwilioError(w, 0, a.status)
		}
	default: // no other outcome reaches write (a duplicate needs a key)
		writeTwilioError(w, 0, a.status)
	}
}

// twilioRetryAfter sets Retry-After as the generic dialect writes it,
// unless d is negative.
func twilioRetryAfter(h http.Header, d time.Duration) {
	if d >= 0 {
		h.Set("Retry-After", wire.FormatSeconds(d))
	}
}

// twilioError is Twilio's error body: code and more_info are absent when
// there is no Twilio code.
type twilioError struct {
	Code     int    `json:"code,omitempty"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info,omitempty"`
	Status   int    `json:"status"`
}

// writeTwilioError answers code with its status and message from
// wire.TwilioCodes, the status given when it is not zero, or a bare status when
// code is zero.
func writeTwilioError(w http.ResponseWriter, code, status int) {
	c := wire.TwilioCodes[code]
	if status == 0 {
		status = c.Status
	}
	body := twilioError{Code: code, Message: c.Message, Status: status}
	if code != 0 {
		body.MoreInfo = "https://www.twilio.com/docs/errors/" + strconv.Itoa(code)
	} else {
		body.Message = http.StatusText(status)
	}
	w.WriteHeader(status)
	writeTwilioJSON(w, body)
}

// twilioMessage is the Message resource a create answers with.
type twilioMessage struct {
	Sid                 string            `json:"sid"`
	DateCreated         string            `json:"date_created"`
	DateUpdated         string            `json:"date_updated"`
	DateSent            *string           `json:"date_sent"`
	AccountSid          string            `json:"account_sid"`
	To                  string            `json:"to"`
	From                *string           `json:"from"`
	MessagingServiceSid *string           `json:"messaging_service_sid"`
	Body                string            `json:"body"`
	Status              string            `json:"status"`
	NumSegments         string            `json:"num_segments"`
	NumMedia            string            `json:"num_media"`
	Direction           string            `json:"direction"`
	APIVersion          string            `json:"api_version"`
	Price               *string           `json:"price"`
	PriceUnit           string            `json:"price_unit"`
	ErrorCode           *int              `json:"error_code"`
	ErrorMessage        *string           `json:"error_message"`
	URI                 string            `json:"uri"`
	SubresourceURIs     map[string]string `json:"subresource_uris"`
}

func (d *twilioDialect) writeMessage(w http.ResponseWriter, a answer, e twilioEcho) {
	uri := "/2010-04-01/Accounts/" + d.accountSID + "/Messages/" + a.messageID
	date := d.now().UTC().Format(time.RFC1123Z)
	m := twilioMessage{
		Sid: a.messageID, DateCreated: date, DateUpdated: date,
		AccountSid: d.accountSID, To: e.To, Body: e.Body,
		Status: "queued", NumSegments: strconv.Itoa(e.Segments), NumMedia: "0",
		Direction: "outbound-api", APIVersion: "2010-04-01", PriceUnit: "USD",
		URI: uri + ".json", SubresourceURIs: map[string]string{"media": uri + "/Media.json"},
	}
	if e.From != "" {
		m.From = &e.From
	}
	if e.Service != "" {
		m.MessagingServiceSid = &e.Service
		m.Status, m.NumSegments = "accepted", "0"
	}
	w.WriteHeader(http.StatusCreated)
	writeTwilioJSON(w, m)
}

// writeTwilioJSON writes v as one line of JSON, with "<", ">" and "&" as they are.
func writeTwilioJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
