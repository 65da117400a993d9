package ledger

// The scripts' calls as values: one struct per script, its fields the
// script's KEYS then ARGV in the order of the script's header (or its
// parts' contracts), each tagged with the header line it stands for
// (TestScriptCallsFollowTheirHeaders checks both).

// receiptCall is one call of receipt.lua.
type receiptCall struct {
	PID  string `lua:"KEYS[1] the provider id's key"`
	Owed string `lua:"KEYS[2] the owed set"`

	Status      string   `lua:"ARGV[1] the receipt's status"`
	Code        string   `lua:"ARGV[2] its error code"`
	At          int64    `lua:"ARGV[3] when the status happened, ms since the epoch"`
	Millis      int64    `lua:"ARGV[4] the owed set's lifetime in milliseconds"`
	Buckets     string   `lua:"ARGV[5] the delivery latency buckets' upper bounds in milliseconds"`
	Age         int64    `lua:"ARGV[6] a sweep's age"`
	Most        int      `lua:"ARGV[7] the most events a sweep returns"`
	Route       string   `lua:"ARGV[8] the route rule"`
	RouteFailed bool     `lua:"ARGV[9] '1' when the receipt is a failure whose code names the route"`
	Counts      string   `lua:"ARGV[10] the delivery counts the process kept since its last write"`
	Published   []string `lua:"ARGV[11..] the events published"`
}

func (c receiptCall) keys() []string {
	if c.PID == "" {
		c.PID = c.Owed // a sweep
	}
	return []string{c.PID, c.Owed}
}

func (c receiptCall) argv() []any {
	a := []any{c.Status, c.Code, c.At, c.Millis, c.Buckets, c.Age, c.Most, c.Route, flag(c.RouteFailed), c.Counts}
	for _, p := range c.Published {
		a = append(a, p)
	}
	return a
}

// storyCall is one call of story.lua.
type storyCall struct {
	Record string `lua:"KEYS[1] id record key"`
	Msg    string `lua:"KEYS[2] the id's key"`
	Owed   string `lua:"KEYS[3] the owed set"`
	Resend string `lua:"KEYS[4] the message's resend payload"`

	ID string `lua:"ARGV[1] the message's id"`
}

func (c storyCall) keys() []string { return []string{c.Record, c.Msg, c.Owed, c.Resend} }
func (c storyCall) argv() []any    { return []any{c.ID} }

// givebackCall is one call of giveback.lua.
type givebackCall struct {
	Msg  string `lua:"KEYS[1] the message's story"`
	Owed string `lua:"KEYS[2] the owed set"`

	ID      string `lua:"ARGV[1] the message's id"`
	Payload string `lua:"ARGV[2] the resend payload"`
}

func (c givebackCall) keys() []string { return []string{c.Msg, c.Owed} }
func (c givebackCall) argv() []any    { return []any{c.ID, c.Payload} }

// deliveryCall is one call of delivery.lua.
type deliveryCall struct {
	Owed string `lua:"KEYS[1] the owed set"`

	Minutes int64    `lua:"ARGV[1] whole minutes to read"`
	Minute  int64    `lua:"ARGV[2] the current unix minute"`
	Classes []string `lua:"ARGV[3..] the classes' names"`
}

func (c deliveryCall) keys() []string { return []string{c.Owed} }

func (c deliveryCall) argv() []any {
	a := []any{c.Minutes, c.Minute}
	for _, class := range c.Classes {
		a = append(a, class)
	}
	return a
}

// flag is a boolean as the scripts read one.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
