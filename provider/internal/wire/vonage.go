package wire

const (
	// VonageClientRefMax is the longest client-ref Vonage takes: "your own
	// reference of up to 100 characters" (40 in versions of the reference
	// before 2022).
	VonageClientRefMax = 100
	// VonageTTLMin and VonageTTLMax bound the ttl field, in milliseconds.
	VonageTTLMin = 20_000
	VonageTTLMax = 604_800_000
)
