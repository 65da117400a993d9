package provider

// The error codes of a final receipt that say a message's route failed:
// the carrier or the network refused the traffic (a filter, a sender not
// provisioned on the destination's carriers, no route), whoever the
// recipient. A handset that is off (Twilio's 30003), a number that does
// not exist (30005) or that no longer takes messages, a landline (30006),
// a recipient's own block (30004, Vonage's "4" and "9") say nothing of the
// route: anyone can make them happen by asking for an OTP to such a
// number. The lists are the providers' own documents (docs/providers.md,
// "Route failures"); a code not listed is not a route failure.

// twilioRouteCodes are Twilio's delivery error codes
// (https://www.twilio.com/docs/api/errors) that name the route.
var twilioRouteCodes = map[string]bool{
	"30007": true, // Message filtered: the carrier's filter
	"30017": true, // Carrier network congestion
	"30018": true, // Destination carrier requires sender ID pre-registration
	"30024": true, // Numeric sender ID not provisioned on the carrier
	"30032": true, // Toll-free number has not been verified
	"30034": true, // US A2P 10DLC: message from an unregistered number
}

// vonageRouteCodes are the SMS API's DLR err-codes
// (https://api.support.vonage.com/hc/en-us/articles/204014733) that name
// the route.
var vonageRouteCodes = map[string]bool{
	"6":  true, // Anti-Spam Rejection: the carrier's anti-spam filter
	"8":  true, // Network Error
	"11": true, // Unroutable: Vonage finds no route for the message
}

// genericRouteCodes are the generic API's: it reports a route failure with
// the Twilio code of the same meaning (docs/contract.md section 3).
var genericRouteCodes = twilioRouteCodes

// routeFailed reports whether d is a final failure whose error code is
// one of codes.
func routeFailed(d DeliveryReport, codes map[string]bool) bool {
	return d.Status.Final() && !d.Status.Delivered() && codes[d.ErrorCode]
}
