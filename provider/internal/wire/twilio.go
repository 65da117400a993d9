package wire

import "net/http"

// TwilioMaxValidity is the longest ValidityPeriod Twilio accepts, in
// seconds (10 hours), and its default.
const TwilioMaxValidity = 36000

// The Twilio error codes the adapter and the simulator name, with the page
// of Twilio's error reference (https://www.twilio.com/docs/api/errors/{code})
// that documents each. TwilioCodes is the one table of them.
const (
	TwilioNotFound          = 20404 // "Not Found": a path that is no resource
	TwilioMethodNotAllowed  = 20004 // "Method not allowed"
	TwilioAuthenticate      = 20003 // "Permission Denied" (the message reads "Authenticate"): wrong AccountSid or AuthToken, or an account suspended or closed
	TwilioAccountNotActive  = 20005 // "Account not active": out of funds, or a free trial not activated
	TwilioAccountInactive   = 10001 // "Account is not active": balance at $0 or below, suspended, disabled for a policy violation
	TwilioForbidden         = 20403 // "403 Forbidden": the account may not use the API, typically suspended or closed
	TwilioAccountSuspended  = 90010 // "Account is not active": the account is suspended
	TwilioTooManyRequests   = 20429 // "Too many requests": over the account's API concurrency; never processed, safe to retry
	TwilioQueueFull         = 21611 // "This 'From' number has exceeded the maximum number of queued messages" (10 hours of them)
	TwilioInternalError     = 20500 // "Internal Server Error"
	TwilioInvalidTo         = 21211 // "Invalid 'To' Phone Number"
	TwilioUnsubscribed      = 21610 // "Attempt to send to unsubscribed recipient": the recipient replied STOP to this sender
	TwilioBodyRequired      = 21602 // "Message body is required"
	TwilioFromRequired      = 21603 // "A 'From' or 'MessagingServiceSid' parameter is required to send a message"
	TwilioToRequired        = 21604 // "'To' phone number is required to send a Message"
	TwilioBodyTooLong       = 21617 // "The concatenated message body exceeds the 1600 character limit"
	TwilioBadValidityPeriod = 21624 // "Invalid validity period value": not an integer from 1 to 36000
)

// TwilioMeaning is what a Twilio error code says whatever the HTTP status
// it came with.
type TwilioMeaning int

const (
	// TwilioByStatus: the code says nothing the status does not.
	TwilioByStatus TwilioMeaning = iota
	// TwilioThrottled: the account is over a rate.
	TwilioThrottled
	// TwilioAccount: the account cannot send at all.
	TwilioAccount
)

// A TwilioCode is what one Twilio error code means and how Twilio answers
// with it.
type TwilioCode struct {
	Means   TwilioMeaning // the adapter's reading, whatever the status
	Status  int           // the HTTP status Twilio answers it with
	Message string        // the message of Twilio's answer
}

// TwilioCodes is the one table of the codes above; the zero TwilioCode
// (TwilioByStatus) stands for any other. 30002 ("Account suspended") is not
// here: Twilio reports it on a message it had queued (the status callback,
// the Message's error_code), never in the answer to a create.
var TwilioCodes = map[int]TwilioCode{
	TwilioAuthenticate:     {TwilioAccount, http.StatusUnauthorized, "Authenticate"},
	TwilioAccountNotActive: {TwilioAccount, http.StatusUnauthorized, "Account not active"},
	TwilioAccountInactive:  {TwilioAccount, http.StatusUnauthorized, "Account is not active"},
	TwilioForbidden:        {TwilioAccount, http.StatusForbidden, "The account lacks permission to access the Twilio API"},
	TwilioAccountSuspended: {TwilioAccount, http.StatusForbidden, "Account is not active"},
	TwilioTooManyRequests:  {TwilioThrottled, http.StatusTooManyRequests, "Too Many Requests"},
	TwilioQueueFull:        {TwilioThrottled, http.StatusBadRequest, "This 'From' number has exceeded the maximum number of queued messages"},

	TwilioNotFound:          {TwilioByStatus, http.StatusNotFound, "The requested resource was not found"},
	TwilioMethodNotAllowed:  {TwilioByStatus, http.StatusMethodNotAllowed, "Method not allowed"},
	TwilioInternalError:     {TwilioByStatus, http.StatusInternalServerError, "Internal Server Error"},
	TwilioInvalidTo:         {TwilioByStatus, http.StatusBadRequest, "The 'To' number is not a valid phone number."},
	TwilioUnsubscribed:      {TwilioByStatus, http.StatusBadRequest, "Attempt to send to unsubscribed recipient"},
	TwilioBodyRequired:      {TwilioByStatus, http.StatusBadRequest, "Message body is required."},
	TwilioFromRequired:      {TwilioByStatus, http.StatusBadRequest, "A 'From' or 'MessagingServiceSid' parameter is required to send a message."},
	TwilioToRequired:        {TwilioByStatus, http.StatusBadRequest, "A 'To' phone number is required."},
	TwilioBodyTooLong:       {TwilioByStatus, http.StatusBadRequest, "The concatenated message body exceeds the 1600 character limit."},
	TwilioBadValidityPeriod: {TwilioByStatus, http.StatusBadRequest, "Invalid validity period value."},
}
