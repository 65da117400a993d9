package provider

// Vonage's SMS API delivery receipts
// (https://developer.vonage.com/messaging/sms/guides/delivery-receipts),
// signed as Vonage's signed webhooks are
// (https://developer.vonage.com/getting-started/concepts/signing-messages)
// and as its SDKs verify them (vonage-node-sdk packages/sms/lib/sms.ts
// verifySignature, vonage-python-sdk check_signature).

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ErrInvalidSignatureMethod reports a VonageConfig.SignatureMethod that is
// none of md5hash, md5, sha1, sha256 and sha512.
var ErrInvalidSignatureMethod = errors.New("provider: invalid signature method")

// vonageSignatures is each signature method a Vonage account can sign its
// webhooks with: md5hash (the dashboard's default) is MD5 of the joined
// parameters with the secret appended; the others are HMACs keyed by the
// secret.
var vonageSignatures = map[string]func(secret, joined []byte) []byte{
	"md5hash": func(secret, joined []byte) []byte {
		sum := md5.Sum(append(slices.Clip(joined), secret...))
		return sum[:]
	},
	"md5":    vonageHMAC(md5.New),
	"sha1":   vonageHMAC(sha1.New),
	"sha256": vonageHMAC(sha256.New),
	"sha512": vonageHMAC(sha512.New),
}

func vonageHMAC(h func() hash.Hash) func(secret, joined []byte) []byte {
	return func(secret, joined []byte) []byte {
		mac := hmac.New(h, secret)
		mac.Write(joined)
		return mac.Sum(nil)
	}
}

// vonageSignatureMethod returns the method's name ("" is md5hash), or an
// error wrapping ErrInvalidSignatureMethod.
func vonageSignatureMethod(method string) (string, error) {
	if method == "" {
		return "md5hash", nil
	}
	if _, ok := vonageSignatures[method]; !ok {
		return "", fmt.Errorf("%w: vonage: SignatureMethod %q is none of md5hash, md5, sha1, sha256, sha512",
			ErrInvalidSignatureMethod, method)
	}
	return method, nil
}

// vonageStatuses maps each DLR status Vonage documents; an unrecognised
// one is StatusUnknown, as Vonage's own "unknown" is.
var vonageStatuses = map[string]DeliveryStatus{
	"accepted":  StatusAccepted,
	"buffered":  StatusBuffered,
	"unknown":   StatusUnknown,
	"delivered": StatusDelivered,
	"expired":   StatusExpired,
	"failed":    StatusFailed,
	"rejected":  StatusRejected,
}

// vonageTimestamp is the layout of a DLR's message-timestamp, in UTC.
const vonageTimestamp = "2006-01-02 15:04:05"

// ReadReceipt verifies and reads one of Vonage's delivery receipts (DLR),
// posted as a form or, with Content-Type application/json, as a JSON
// object of strings and numbers. It must carry sig, the signed webhook's
// signature: every parameter but sig (timestamp and nonce included),
// sorted by name, each value's '&' and '=' replaced by '_', joined as
// "&name=value..." and hashed with the SignatureSecret (read at each call)
// by the SignatureMethod; sig is hex, compared in constant time and in
// either case. An adapter without a SignatureSecret verifies nothing: every
// receipt is ErrForged. A body Vonage does not sign (a name given twice, a
// form that does not parse, a JSON value neither string nor number) is
// ErrMalformed once what it holds verifies, else ErrForged.
//
// The report is messageId (the part's id), client-ref (Ref: the message's
// ID as Send cut it, to 100 bytes), status (an unrecognised one is
// StatusUnknown), err-code (dropped when "0") and message-timestamp (At,
// UTC; zero when absent or not Vonage's layout). scts is not read: it is
// the carrier's local time, to the minute.
func (v *Vonage) ReadReceipt(r ReceiptRequest) (DeliveryReport, error) {
	params, malformed := vonageParams(r) // told once params verify
	if err := v.verify(params); err != nil {
		return DeliveryReport{}, err
	}
	if malformed != nil {
		return DeliveryReport{}, malformed
	}
	return vonageReport(params)
}

// verify checks params' sig.
func (v *Vonage) verify(params map[string]string) error {
	sig := params["sig"]
	var secret string
	if v.cfg.SignatureSecret != nil {
		secret = v.cfg.SignatureSecret.Value()
	}
	switch {
	case sig == "":
		return fmt.Errorf("%w: vonage: no sig", ErrForged)
	case secret == "":
		return fmt.Errorf("%w: vonage: no signature secret", ErrForged)
	}
	sign := vonageSignatures[v.cfg.SignatureMethod] // NewVonage checked it
	if !hexMACEqual(sign([]byte(secret), vonageJoined(params)), sig) {
		return fmt.Errorf("%w: vonage: sig does not match", ErrForged)
	}
	return nil
}

// vonageJoined is the string a signed webhook's sig covers:
// "&name=value" for every parameter but sig, in name order, with '&' and
// '=' in each value replaced by '_'. Empty values are kept, as node's and
// python's verifiers keep them (Java's drops them).
func vonageJoined(params map[string]string) []byte {
	names := make([]string, 0, len(params))
	for name := range params {
		if name != "sig" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	clean := strings.NewReplacer("&", "_", "=", "_")
	var b bytes.Buffer
	for _, name := range names {
		b.WriteByte('&')
		b.WriteString(name)
		b.WriteByte('=')
		clean.WriteString(&b, params[name])
	}
	return b.Bytes()
}

// vonageParams reads a DLR's parameters from its form or JSON body: every
// one it can read (a repeated name's first value), enough to verify the
// body, and, when the body is not one Vonage signs, an error wrapping
// ErrMalformed, told only once the parameters verify: an unsigned body is
// forged, whatever it holds.
func vonageParams(r ReceiptRequest) (map[string]string, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" {
		return vonageJSONParams(r.Body)
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil {
		err = fmt.Errorf("%w: vonage: the body is not a form", ErrMalformed)
	}
	params := make(map[string]string, len(form))
	for name, values := range form {
		if len(values) != 1 && err == nil {
			err = fmt.Errorf("%w: vonage: a parameter given %d times", ErrMalformed, len(values))
		}
		params[name] = values[0]
	}
	return params, err
}

// vonageJSONParams reads a JSON object of strings and numbers (a number as
// it is written); anything else cannot be signed as Vonage signs, and is
// left out of the parameters.
func vonageJSONParams(body []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%w: vonage: the body is not a JSON object", ErrMalformed)
	}
	var err error
	if _, end := dec.Token(); end != io.EOF {
		err = fmt.Errorf("%w: vonage: data after the JSON object", ErrMalformed)
	}
	params := make(map[string]string, len(raw))
	for name, value := range raw {
		switch value := value.(type) {
		case string:
			params[name] = value
		case json.Number:
			params[name] = value.String()
		default:
			if err == nil {
				err = fmt.Errorf("%w: vonage: a value that is neither a string nor a number", ErrMalformed)
			}
		}
	}
	return params, err
}

// vonageReport reads a verified DLR's parameters.
// vonageOptedOut is the err-code of a Vonage receipt for a recipient who
// asked not to receive the sender's messages.
const vonageOptedOut = "9"

func vonageReport(params map[string]string) (DeliveryReport, error) {
	status := params["status"]
	if status == "" {
		return DeliveryReport{}, fmt.Errorf("%w: vonage: no status", ErrMalformed)
	}
	d := DeliveryReport{ProviderID: params["messageId"], Ref: params["client-ref"], ErrorCode: params["err-code"]}
	var ok bool
	if d.Status, ok = vonageStatuses[status]; !ok {
		d.Status = StatusUnknown
	}
	if d.ErrorCode == "0" {
		d.ErrorCode = "" // "0" is Vonage's "Delivered": no error
	}
	d.RouteFailed = routeFailed(d, vonageRouteCodes)
	if n := params["msisdn"]; d.ErrorCode == vonageOptedOut && (d.Status == StatusFailed || d.Status == StatusRejected) && n != "" {
		d.OptedOut = "+" + strings.TrimPrefix(n, "+")
	}
	if at, err := time.Parse(vonageTimestamp, params["message-timestamp"]); err == nil {
		d.At = at
	}
	if err := checkReport(d); err != nil {
		return DeliveryReport{}, fmt.Errorf("vonage: %w", err)
	}
	return d, nil
}
