package receipts

import "time"

// TEMPORARY: replaced by admission's at merge
type (
	Report = tmpReport
	Fold   = tmpFold
)

// tmpReport is a copy of admission.Report.
type tmpReport struct {
	ProviderID       string
	Status           string
	Final, Delivered bool
	ErrorCode        string
	At               time.Time
}

// tmpFold is a copy of admission.Fold.
type tmpFold struct {
	Known             bool
	ID, Class, Sender string
	ProviderID        string
	Status            string
	ErrorCode         string
	SentAt, StatusAt  time.Time
	Final             bool
	Changed           bool
	Owed              bool
	Resend            []byte
	Account           string
}
