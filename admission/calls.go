package admission

import "strconv"

// The scripts' calls as values: one struct per script, its fields the
// script's KEYS then ARGV in the order of the script's header, each tagged
// with the header line it stands for (TestScriptCallsFollowTheirHeaders
// checks both). Durations are in the unit the header gives. release.lua
// takes lists and is called with them directly.

// admitCall is one call of the admission script.
type admitCall struct {
	GlobalTAT  string   `lua:"KEYS[1] global TAT key"`
	CeilingTAT string   `lua:"KEYS[2] the caller's class's ceiling TAT key"`
	Penalty    string   `lua:"KEYS[3] penalty key"`
	Wake       string   `lua:"KEYS[4] wake-ticket key of the caller's class"`
	Override   string   `lua:"KEYS[5] rate override"`
	Leases     string   `lua:"KEYS[6] in-flight leases"`
	Probe      string   `lua:"KEYS[7] probe key"`
	Learned    string   `lua:"KEYS[8] learned rate"`
	Record     string   `lua:"KEYS[9] the id's record"`
	Health     string   `lua:"KEYS[10] the account's health"`
	Skip       string   `lua:"KEYS[11] the skip of the account's route to the caller's destination"`
	Reserves   []string `lua:"KEYS[12..] the TAT keys of the earlier classes' reserves the caller's"`
	LaterWakes []string `lua:"KEYS[12+R..] the wake-ticket keys of the later classes held to a"`
	Senders    []string `lua:"KEYS[12+R+W..] the sender pool's keys, none without a pool"`

	GlobalInterval  int64  `lua:"ARGV[1] global emission interval in microseconds"`
	GlobalTau       int64  `lua:"ARGV[2] global tolerance tau in microseconds"`
	CeilingInterval int64  `lua:"ARGV[3] the caller's class's ceiling emission interval in microseconds"`
	CeilingTau      int64  `lua:"ARGV[4] the ceiling's tolerance tau in microseconds"`
	OverrideCeiling bool   `lua:"ARGV[5] '1' when the override's second rate lowers the caller's"`
	RecoveryFloor   int64  `lua:"ARGV[6] recovery floor in microseconds"`
	Reserve         int64  `lua:"ARGV[7] the caller's class's reserve of the global level in"`
	Tickets         string `lua:"ARGV[8] wake tickets"`
	Spacing         int64  `lua:"ARGV[9] ticket spacing in microseconds"`
	Within          int64  `lua:"ARGV[10] the longest the caller will wait, in microseconds"`
	MaxInFlight     int    `lua:"ARGV[11] the most sends in flight on the account"`
	Lease           string `lua:"ARGV[12] the lease member of this send"`
	LeaseTTL        int64  `lua:"ARGV[13] lease lifetime in microseconds"`
	Cost            int    `lua:"ARGV[14] cost"`
	Lookahead       int64  `lua:"ARGV[15] lookahead in microseconds"`
	Token           string `lua:"ARGV[16] claim token"`
	ClaimMillis     int64  `lua:"ARGV[17] claim lifetime in milliseconds"`
	Count           bool   `lua:"ARGV[18] '1' to count this send"`
	Adaptive        string `lua:"ARGV[19] the learned rate's search"`
	SenderIntervals string `lua:"ARGV[20] the sender pool's emission intervals in microseconds"`
	ProbeEvery      int64  `lua:"ARGV[21] the probe interval of a degraded account, in microseconds"`
	Failover        bool   `lua:"ARGV[22] '1' when the caller can send elsewhere (failover)"`
	RouteProbeEvery int64  `lua:"ARGV[23] the probe interval of a skipped route, in microseconds"`
	ReserveLevels   string `lua:"ARGV[24] the reserves the caller's class is held to, one"`
	WakePushes      string `lua:"ARGV[25] the push of each wake ticket of KEYS[12+R..], in"`
	HedgedProbe     int64  `lua:"ARGV[26] the probe interval of a degraded account for a caller that"`
}

func (c admitCall) keys() []string {
	k := make([]string, fixedKeys, fixedKeys+c.lists())
	for n := range k {
		k[n] = c.key(n + 1)
	}
	return append(append(append(k, c.Reserves...), c.LaterWakes...), c.Senders...)
}

// key returns KEYS[n] of c, one of the fixed keys (n <= fixedKeys).
func (c *admitCall) key(n int) string {
	return [...]string{c.GlobalTAT, c.CeilingTAT, c.Penalty, c.Wake, c.Override, c.Leases, c.Probe, c.Learned, c.Record, c.Health, c.Skip}[n-1]
}

// lists returns the lists of keys that follow the fixed ones.
func (c *admitCall) lists() int { return len(c.Reserves) + len(c.LaterWakes) + len(c.Senders) }

func (c admitCall) argv() []any {
	a := make([]any, admitArgs)
	for n := range a {
		a[n] = c.arg(n + 1)
	}
	return a
}

// admitArgs is how many ARGV admitCall has.
const admitArgs = 26

// arg returns ARGV[n] of c, as the script reads it.
func (c *admitCall) arg(n int) any {
	switch n {
	case 1:
		return c.GlobalInterval
	case 2:
		return c.GlobalTau
	case 3:
		return c.CeilingInterval
	case 4:
		return c.CeilingTau
	case 5:
		return flag(c.OverrideCeiling)
	case 6:
		return c.RecoveryFloor
	case 7:
		return c.Reserve
	case 8:
		return c.Tickets
	case 9:
		return c.Spacing
	case 10:
		return c.Within
	case 11:
		return c.MaxInFlight
	case 12:
		return c.Lease
	case 13:
		return c.LeaseTTL
	case 14:
		return max(c.Cost, 1)
	case 15:
		return max(c.Lookahead, 0)
	case 16:
		return c.Token
	case 17:
		return c.ClaimMillis
	case 18:
		return flag(c.Count)
	case 19:
		return c.Adaptive
	case 20:
		return c.SenderIntervals
	case 21:
		return c.ProbeEvery
	case 22:
		return flag(c.Failover)
	case 23:
		return c.RouteProbeEvery
	case 24:
		return c.ReserveLevels
	case 25:
		return c.WakePushes
	case 26:
		return c.HedgedProbe
	}
	panic("admitCall: no ARGV " + strconv.Itoa(n))
}

// perSend says whether admitCallOf sets ARGV[n] of a class's call for
// each send; every other value is the class's, as New built it, boxed
// once (classArgv).
func perSend(n int) bool {
	switch n {
	case 6, 8, 10, 12, 14, 15, 16, 17, 18, 22, 26:
		return true
	}
	return false
}

// penaltyCall is one call of penalty.lua.
type penaltyCall struct {
	Penalty   string `lua:"KEYS[1] penalty key"`
	GlobalTAT string `lua:"KEYS[2] global TAT key"`
	Probe     string `lua:"KEYS[3] probe key"`
	Learned   string `lua:"KEYS[4] learned rate"`
	Override  string `lua:"KEYS[5] rate override"`

	Millis    int64  `lua:"ARGV[1] penalty length in milliseconds"`
	GlobalTau int64  `lua:"ARGV[2] global tolerance tau in microseconds"`
	Why       string `lua:"ARGV[3] why"`
	Adaptive  string `lua:"ARGV[4] the learned rate's search"`
}

func (c penaltyCall) keys() []string {
	return []string{c.Penalty, c.GlobalTAT, c.Probe, c.Learned, c.Override}
}
func (c penaltyCall) argv() []any { return []any{c.Millis, c.GlobalTau, c.Why, c.Adaptive} }

// resumeCall is one call of resume.lua.
type resumeCall struct {
	Penalty   string `lua:"KEYS[1] penalty key"`
	GlobalTAT string `lua:"KEYS[2] global TAT key"`
	Probe     string `lua:"KEYS[3] probe key"`

	Debt int64  `lua:"ARGV[1] debt kept in microseconds"`
	What string `lua:"ARGV[2] what to end"`
}

func (c resumeCall) keys() []string { return []string{c.Penalty, c.GlobalTAT, c.Probe} }
func (c resumeCall) argv() []any    { return []any{c.Debt, c.What} }

// pauseCall is one call of pause.lua.
type pauseCall struct {
	Penalty string `lua:"KEYS[1] penalty key"`
}

func (c pauseCall) keys() []string { return []string{c.Penalty} }
func (c pauseCall) argv() []any    { return nil }

// overrideCall is one call of override.lua.
type overrideCall struct {
	Override      string   `lua:"KEYS[1] override"`
	GlobalTAT     string   `lua:"KEYS[2] global TAT key"`
	MarketingTAT  string   `lua:"KEYS[3] marketing TAT key"`
	WakeOTP       string   `lua:"KEYS[4] OTP wake-ticket key"`
	WakeMarketing string   `lua:"KEYS[5] marketing wake-ticket key"`
	WakeOthers    []string `lua:"KEYS[6..] the other classes' wake-ticket keys"`

	TargetRPS         string `lua:"ARGV[1] target_rps"`
	MarketingRPS      string `lua:"ARGV[2] marketing_rps"`
	Millis            int64  `lua:"ARGV[3] lifetime in milliseconds"`
	GlobalInterval    int64  `lua:"ARGV[4] configured global emission interval in microseconds"`
	MarketingInterval int64  `lua:"ARGV[5] configured marketing emission interval in microseconds"`
	GlobalTau         int64  `lua:"ARGV[6] configured global tolerance tau in microseconds"`
	MarketingTau      int64  `lua:"ARGV[7] configured marketing tolerance tau in microseconds"`
}

func (c overrideCall) keys() []string {
	return append([]string{c.Override, c.GlobalTAT, c.MarketingTAT, c.WakeOTP, c.WakeMarketing}, c.WakeOthers...)
}

func (c overrideCall) argv() []any {
	return []any{c.TargetRPS, c.MarketingRPS, c.Millis, c.GlobalInterval, c.MarketingInterval, c.GlobalTau, c.MarketingTau}
}

// claimCall is one call of claim.lua.
type claimCall struct {
	Record string `lua:"KEYS[1] id record key"`

	Token  string `lua:"ARGV[1] claim token"`
	Millis int64  `lua:"ARGV[2] claim lifetime in milliseconds"`
}

func (c claimCall) keys() []string { return []string{c.Record} }
func (c claimCall) argv() []any    { return []any{c.Token, c.Millis} }

// finishCall is one call of finish.lua.
type finishCall struct {
	Record  string   `lua:"KEYS[1] id record key"`
	Leases  string   `lua:"KEYS[2] in-flight leases"`
	Counter string   `lua:"KEYS[3] the sends counter"`
	Health  string   `lua:"KEYS[4] the account's health"`
	Msg     string   `lua:"KEYS[5] the id's key"`
	Resend  string   `lua:"KEYS[6] the message's resend payload"`
	Parts   []string `lua:"KEYS[7..] the provider's ids of the message's parts, in order"`

	Value        string   `lua:"ARGV[1] the record"`
	Millis       int64    `lua:"ARGV[2] record lifetime in milliseconds"`
	Token        string   `lua:"ARGV[3] the caller's claim token"`
	Units        int      `lua:"ARGV[4] units the provider accepted"`
	Result       string   `lua:"ARGV[5] what the send said of the account's health"`
	Rule         string   `lua:"ARGV[6] the health rule"`
	ID           string   `lua:"ARGV[7] the message's id"`
	Class        string   `lua:"ARGV[8] its class's name"`
	Sender       string   `lua:"ARGV[9] the sender it went from"`
	ResendData   string   `lua:"ARGV[10] the resend payload"`
	ResendMillis int64    `lua:"ARGV[11] the resend payload's lifetime in milliseconds"`
	Prefix       string   `lua:"ARGV[12] the destination's prefix and number hash"`
	SentMillis   int64    `lua:"ARGV[13] when the send's slot opened"`
	ByID         bool     `lua:"ARGV[14] '1' to set KEYS[5]"`
	Ended        []string `lua:"ARGV[15..] lease members to end"`
}

func (c finishCall) keys() []string {
	if c.Counter == "" {
		c.Counter = c.Leases // not counted: any key of the account's slot
	}
	if c.Msg == "" {
		c.Msg = c.Leases
	}
	if c.Resend == "" {
		c.Resend = c.Leases
	}
	return append([]string{c.Record, c.Leases, c.Counter, c.Health, c.Msg, c.Resend}, c.Parts...)
}

func (c finishCall) argv() []any {
	a := []any{c.Value, c.Millis, c.Token, c.Units, c.Result, c.Rule, c.ID, c.Class, c.Sender, c.ResendData, c.ResendMillis, c.Prefix, c.SentMillis, flag(c.ByID)}
	for _, m := range c.Ended {
		a = append(a, m)
	}
	return a
}

// healthCall is one call of health.lua.
type healthCall struct {
	Health string `lua:"KEYS[1] the account's health"`
}

func (c healthCall) keys() []string { return []string{c.Health} }
func (c healthCall) argv() []any    { return nil }

// forgetCall is one call of forget.lua.
type forgetCall struct {
	Record string `lua:"KEYS[1] id record key"`

	Clear bool `lua:"ARGV[1] '1' to clear a refusal's record, '0' only to read it"`
}

func (c forgetCall) keys() []string { return []string{c.Record} }
func (c forgetCall) argv() []any    { return []any{flag(c.Clear)} }

// learnedCall is one call of learned.lua.
type learnedCall struct {
	Learned string `lua:"KEYS[1] learned rate"`

	Op   string `lua:"ARGV[1] 'get', 'reset'"`
	Rate string `lua:"ARGV[2] the rate to pin"`
}

func (c learnedCall) keys() []string { return []string{c.Learned} }
func (c learnedCall) argv() []any    { return []any{c.Op, c.Rate} }

// flag is a boolean as the scripts read one.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// poolCall is one call of pool.lua.
type poolCall struct {
	Indexes []string `lua:"KEYS[1..] the pool's indexes"`

	Prefix  string   `lua:"ARGV[1] the prefix of the senders' TAT keys"`
	Millis  int64    `lua:"ARGV[2] the indexes' lifetime in milliseconds"`
	Counts  string   `lua:"ARGV[3] how many senders each index holds, space-separated"`
	Members []string `lua:"ARGV[4..] the senders' From, index after index"`
}

func (c poolCall) keys() []string { return c.Indexes }
func (c poolCall) argv() []any {
	a := []any{c.Prefix, c.Millis, c.Counts}
	for _, m := range c.Members {
		a = append(a, m)
	}
	return a
}
