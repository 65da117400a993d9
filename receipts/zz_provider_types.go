package receipts

import (
	"errors"
	"net/http"
	"time"
)

// TEMPORARY: replaced by provider's at merge
type (
	DeliveryStatus = tmpDeliveryStatus
	DeliveryReport = tmpDeliveryReport
	ReceiptRequest = tmpReceiptRequest
	ReceiptReader  = tmpReceiptReader
)

// TEMPORARY: replaced by provider's at merge
var (
	ErrForged    = errors.New("provider: receipt does not verify")
	ErrMalformed = errors.New("provider: malformed receipt")
)

// tmpDeliveryStatus is a copy of provider.DeliveryStatus.
type tmpDeliveryStatus string

func (s tmpDeliveryStatus) Final() bool {
	switch s {
	case "delivered", "undelivered", "failed", "expired", "rejected":
		return true
	}
	return false
}

func (s tmpDeliveryStatus) Delivered() bool { return s == "delivered" }

// tmpDeliveryReport is a copy of provider.DeliveryReport.
type tmpDeliveryReport struct {
	ProviderID string
	Ref        string
	Status     DeliveryStatus
	ErrorCode  string
	At         time.Time
}

// tmpReceiptRequest is a copy of provider.ReceiptRequest.
type tmpReceiptRequest struct {
	URL    string
	Header http.Header
	Body   []byte
}

// tmpReceiptReader is a copy of provider.ReceiptReader.
type tmpReceiptReader interface {
	ReadReceipt(r ReceiptRequest) (DeliveryReport, error)
}
