package main

// gateMutants break what decides whether a message may go at all: the
// suppression list, the send windows and caps with their deferral store,
// and the pumping guard.
var gateMutants = []mutant{
	// The suppression list: a number that said STOP is never texted again,
	// on any account, by any path.
	{"SL1", "the list and the guard not asked before admission: a suppressed message takes a slot", []edit{
		{"dispatch/pipeline.go", "	case d.refused(ctx, class, msg, r[0], &t):\n", "	case false && d.refused(ctx, class, msg, r[0], &t):\n"},
	}, "./dispatch/"},
	{"SL2", "the list not checked again before the send: a STOP while a message waits for its slot is not honoured", []edit{
		{"dispatch/send.go", "	if d.refused(ctx, class, m, t.home, &t) {", "	if false && d.refused(ctx, class, m, t.home, &t) {"},
	}, "./dispatch/"},
	{"SL3", "a 21610 settles the message but puts nothing on the list", []edit{
		{"dispatch/send.go", "		d.optedOut(ctx, a, m)\n", ""},
	}, "./dispatch/"},
	{"SL4", "a 21610 read as any refusal: dead-lettered, the number left off the list", []edit{
		{"nack/outcome.go", "	if o, ok := errors.AsType[optedOut](err); ok && o.OptedOut() {", "	if o, ok := errors.AsType[optedOut](err); false && ok && o.OptedOut() {"},
	}, "./dispatch/"},
	{"SL5", "a class's suppression: false ignored", []edit{
		{"dispatch/suppress.go", "d.deps.Suppressions == nil || !d.policy(class).Suppressed", "d.deps.Suppressions == nil"},
	}, "./dispatch/"},
	{"SL6", "a gap in the change log ignored: a process keeps numbers removed and misses those added", []edit{
		{"suppress/list.go", "				if c.seq != l.seq+1 {", "				if false {"},
	}, "./suppress/"},
	{"SL7", "a process does not apply the log's changes: its copy goes stale", []edit{
		{"suppress/list.go", "				l.Apply(c.Entry)\n", ""},
	}, "./suppress/"},
	{"SL8", "an add overwrites the first entry: the record of when a number was suppressed is lost", []edit{
		{"suppress/change.lua", "changed = redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])", "changed = redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) + 1"},
	}, "./suppress/"},
	{"SL9", "deadletters replay republishes a message to a number on the list", []edit{
		{"deadletter/replay.go", "		case stopped:\n", "		case false && stopped:\n"},
	}, "./cmd/dispatcher/"},
	{"SL10", "a body that only begins with STOP is not a STOP (\"Stop. Thank you\")", []edit{
		{"suppress/keywords.go", "ok && (rest == \"\" || notWord(rune(rest[0])))", "ok && rest == \"\""},
	}, "./suppress/"},
	{"SL11", "a redelivered inbound webhook is published again", []edit{
		{"server/suppress.go", "	if !first {\n", "	if !first && false {\n"},
	}, "./server/"},
	{"SL12", "a Vonage receipt of an opt-out (err-code 9) suppresses nothing", []edit{
		{"provider/receipt_vonage.go", "if n := params[\"msisdn\"]; d.ErrorCode == vonageOptedOut &&", "if n := params[\"msisdn\"]; false && d.ErrorCode == vonageOptedOut &&"},
	}, "./provider/"},

	// Send windows, caps and the deferral store.
	{"W1", "the send window's check skipped: a campaign goes out at night", []edit{
		{"dispatch/hold.go", "if d.deps.Deferral == nil || (rules.Window == nil && rules.Cap.Count == 0) {", "if true {"},
	}, "./dispatch/"},
	{"W2", "a number of several zones judged in its first zone only", []edit{
		{"window/window.go", "\tfor _, z := range zones {\n\t\tif !r.openAt(t.In(z)) {", "\tfor _, z := range zones[:1] {\n\t\tif !r.openAt(t.In(z)) {"},
	}, "./window/"},
	{"W3", "a deferral the store could not take acked: the message is lost", []edit{
		{"dispatch/hold.go", "return try{outcome: nack.Denied, err: fmt.Errorf(\"deferral store unavailable: %w\", err)}, h, true", "return try{outcome: nack.Deferred}, h, true"},
	}, "./dispatch/"},
	{"W4", "the cap lets one more through than its count", []edit{
		{"deferral/cap.lua", "if redis.call('ZCARD', KEYS[1]) >= count then", "if redis.call('ZCARD', KEYS[1]) > count then"},
	}, "./deferral/"},
	{"W5", "a release claimed without a lease: a releaser killed mid-release loses its messages", []edit{
		{"deferral/claim.lua", "    redis.call('ZADD', KEYS[1], ARGV[3], id)\n", "    redis.call('ZREM', KEYS[1], id)\n"},
	}, "./dispatch/"},
	{"W6", "a deferred message released past its deadline", []edit{
		{"deferral/release.go", "case !c.Deadline.IsZero() && !now.Before(c.Deadline):", "case !c.Deadline.IsZero() && now.Before(time.Time{}):"},
	}, "./deferral/"},

	// The pumping guard (guard/, and its two questions in dispatch).
	{"GU1", "the guard lets every country through", []edit{
		{"guard/rules.go", "if g != nil && !countryAllowed(g, to) {", "if false {"},
	}, "./dispatch/"},
	{"GU2", "the dispatcher never asks the guard: a blocked message is sent", []edit{
		{"dispatch/suppress.go", "if b := d.guardBlocks(ctx, class, m, home); b.blocked != \"\" {", "if b := d.guardBlocks(ctx, class, m, home); false && b.blocked != \"\" {"},
	}, "./dispatch/"},
	{"GU3", "a range's brake never blocks", []edit{
		{"guard/sent.lua", "    if n >= pcount then", "    if n > pcount * 1000 then"},
	}, "./dispatch/"},
	{"GU4", "a block stays with the process that set it: no push, no poll", []edit{
		{"guard/sent.lua", "  redis.call('PUBLISH', blocks, 'block')", "  out = out"},
		{"guard/guard.go", "		case <-t.C:\n			g.refresh(ctx)", "		case <-t.C:"},
	}, "./dispatch/"},
	{"GU5", "a send is never counted in its range", []edit{
		{"dispatch/send.go", "	d.guardSent(class, m)\n", ""},
	}, "./dispatch/"},
	{"GU6", "verifications ignored: a range whose codes are used is blocked too", []edit{
		{"guard/verify.lua", "redis.call('ZADD', k, at, ARGV[1])", "k = k"},
	}, "./dispatch/"},
	{"GU7", "conversion judged without its grace: codes not yet typed count as unused", []edit{
		{"guard/sent.lua", "local sends = redis.call('ZCOUNT', s, '(' .. (now - cper), now - grace)", "local sends = redis.call('ZCOUNT', s, '(' .. (now - cper), now)"},
		{"guard/sent.lua", "local verified = redis.call('ZCOUNT', v, '(' .. (now - cper), now - grace)", "local verified = redis.call('ZCOUNT', v, '(' .. (now - cper), now)"},
	}, "./dispatch/"},
	{"GU8", "allow_prefixes ignored by the automatic blocks", []edit{
		{"guard/rules.go", "allowed := g != nil && hasPrefix(to, g.AllowPrefixes)", "allowed := false"},
	}, "./guard/"},

	// The deferral store's release, a page of ids removed per call.
	{"DR1", "a release's remove erases a deferral made since its claim: the message is never sent", []edit{
		{"deferral/remove.lua", "    ok = owners[i - 1] == ARGV[1]\n", "    ok = true\n"},
	}, "./deferral/"},
	{"DR2", "the releasers' stats read the whole deferred set every 10 s: a million block Redis for seconds", []edit{
		{"deferral/stats.lua", "if tonumber(ARGV[2]) > 0 then", "if true then"},
	}, "./deferral/"},

	// The release spread, capped before a message's deadline.
	{"DR3", "the release spread past a message's deadline: a window opening before it ends the message expired", []edit{
		{"deferral/store.go", "	if !deadline.IsZero() && !next.IsZero() {\n", "	if false {\n"},
	}, "./deferral/"},
	{"DR4", "a release claimed for 40 s: one its releaser's death interrupts is finished after the 30 s promised", []edit{
		{"deferral/store.go", "const ClaimLease = 20 * time.Second", "const ClaimLease = 40 * time.Second"},
	}, "./cmd/dispatcher/"},
	{"DR5", "an operator's drop publishes no final status event: its producer never learns the message's end", []edit{
		{"deferral/store.go", "		s.event(ctx, Message{Class: class, ID: id}, EndDropped, time.Time{})\n", ""},
	}, "./deferral/"},
	{"DR6", "a release leaves no trace: once released, nothing says the message was deferred", []edit{
		{"deferral/store.go", "	if len(gone) > 0 {\n", "	if false {\n"},
	}, "./deferral/"},
	{"DR7", "an early release passes the cap too: an operator's release breaks a legal cap", []edit{
		{"deferral/defer.lua", "if redis.call('SREM', KEYS[4], ARGV[1]) == 1 and ARGV[5] == 'window' then", "if redis.call('SREM', KEYS[4], ARGV[1]) == 1 then"},
	}, "./deferral/"},
	{"DR8", "a message released early past its window is sent without its cap's check", []edit{
		{"deferral/store.go", "			if err != nil || j.Verdict != Send {\n				return j, err\n			}\n", "			return j, err\n"},
	}, "./deferral/"},
	{"HM1", "a message stopped after its admission on another account names that account, not its home", []edit{
		{"dispatch/pipeline.go", "	case (t.outcome == nack.Suppressed || t.outcome == nack.Blocked) && len(r) > 0:", "	case false:"},
	}, "./dispatch/"},
	{"DR9", "an operator's drop of a message released, or being released, says dropped and publishes its final event", []edit{
		{"deferral/remove.lua", "    ok = not owners[i - 1] and redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1\n", "    ok = true\n"},
	}, "./deferral/"},
}
