package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"smsdispatcher/provider"
	"smsdispatcher/provider/internal/wire"
)

// NewGeneric returns a Simulator of the generic API with cfg's zero fields
// set to their defaults. A send's status_callback, if present, is where
// its delivery receipt is posted (see ReceiptConfig).
func NewGeneric(cfg Config, opts ...Option) *Simulator {
	return newSimulator(cfg, genericDialect{}, opts...)
}

// genericDialect is the generic JSON API of docs/contract.md section 3.
type genericDialect struct{}

func (genericDialect) messageID(n int) string { return fmt.Sprintf("msg-%08d", n) }

func (genericDialect) read(w http.ResponseWriter, r *http.Request, token string) request {
	in := request{key: r.Header.Get("Idempotency-Key")}
	in.id = in.key
	body, err := readRouted(w, r, r.URL.Path == "/v1/messages", &in)
	if in.routeFault != 0 {
		return in
	}
	in.authorized = bearerMatches(r.Header.Get("Authorization"), token)
	if !in.authorized {
		return in
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		in.bodyFault = http.StatusUnsupportedMediaType
		return in
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		in.bodyFault = http.StatusRequestEntityTooLarge
		return in
	}
	var msg struct {
		To        *string `json:"to"`
		Body      *string `json:"body"`
		ClientRef string  `json:"client_ref"`
		From      string  `json:"from"`
		Callback  string  `json:"status_callback"`
	}
	if err == nil {
		err = json.Unmarshal(body, &msg) // also refuses data after the object
	}
	if in.id == "" {
		in.id = msg.ClientRef
	}
	in.from = msg.From
	if err != nil || msg.To == nil || !isE164(*msg.To) || msg.Body == nil || *msg.Body == "" {
		in.bodyFault = http.StatusBadRequest
		return in
	}
	in.to = *msg.To
	in.callback, in.ref = msg.Callback, msg.ClientRef
	in.segments, _ = provider.Segments(*msg.Body)
	return in
}

func bearerMatches(h, token string) bool {
	if token == "" {
		return true
	}
	scheme, tok, _ := strings.Cut(h, " ")
	return strings.EqualFold(scheme, "Bearer") && secretEqual(tok, token)
}

func (genericDialect) write(w http.ResponseWriter, a answer) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch a.status {
	case http.StatusTooManyRequests:
		if a.retryAfter >= 0 {
			h.Set("Retry-After", wire.FormatSeconds(a.retryAfter))
		}
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(a.status)
	body := map[string]string{"error": a.reason}
	if a.optedOut && a.outcome == outRefused {
		body["code"] = "opted_out" // docs/contract.md section 7; written here, not read from package provider, so each checks the other
	}
	if a.status >= 200 && a.status < 300 {
		body = map[string]string{"status": a.reason}
		if a.messageID != "" {
			body["id"] = a.messageID
		}
	}
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}
