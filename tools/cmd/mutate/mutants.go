package main

import (
	"path/filepath"
	"slices"
	"strings"
)

// edit replaces Old by New, which must occur exactly once in File.
type edit struct {
	File, Old, New string
}

type mutant struct {
	ID, Name string
	Edits    []edit
	Pkg      string // whose tests must kill it; "" means ./admission/
}

func (m mutant) pkg() string {
	if m.Pkg == "" {
		return "./admission/"
	}
	return m.Pkg
}

// scriptDirs are the packages whose tests read their scripts from a copy
// named by SMS_MUTATE_SCRIPTS (their mutate_test.go).
var scriptDirs = []string{"admission", "ledger"}

// scriptsOnly reports whether m edits the scripts of one package of
// scriptDirs and nothing else, and that package's tests judge it: try
// then runs them on a copy of the scripts beside the module, without a
// build. It returns the package's directory.
func (m mutant) scriptsOnly() (string, bool) {
	dir := strings.Trim(m.pkg(), "./")
	if !slices.Contains(scriptDirs, dir) {
		return "", false
	}
	for _, e := range m.Edits {
		if !strings.HasPrefix(e.File, dir+"/") || filepath.Ext(e.File) != ".lua" {
			return "", false
		}
	}
	return dir, true
}

// mutants is every mutant the check applies: the rates' and the send's
// (below), whether a message may go at all (mutants_gate.go), the
// console's (mutants_console.go) and the opt-outs' gaps
// (mutants_optout.go).
var mutants = slices.Concat(coreMutants, gateMutants, consoleMutants, optOutMutants)

// coreMutants break the limiter, the send, the receipts and their records.
var coreMutants = []mutant{
	{"M1", "process clock instead of TIME", []edit{
		{"admission/admit/prelude.lua", "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])", "local now = tonumber(ARGV[6])\nARGV[6] = '0'"},
		{"admission/eval.go", "	lease := call.Lease\n", "	lease := call.Lease\n	call.RecoveryFloor = l.clock.Now().UnixMicro()\n"},
	}, ""},
	{"M2", "idle time banks credit", []edit{
		{"admission/admit/global.lua", "tat_g = math.max(num(s[1]) or 0, now)", "tat_g = num(s[1]) or now"},
		{"admission/admit/ceiling.lua", "tat_m = math.max(num(s[2]) or 0, now)", "tat_m = num(s[2]) or now"},
		{"admission/admit/global.lua", "tat_g = math.max(tat_g, at) + cost * g_int", "tat_g = tat_g + cost * g_int"},
		{"admission/admit/ceiling.lua", "  tat_m = math.max(tat_m, at) + cost * m_int", "  tat_m = tat_m + cost * m_int"},
	}, ""},
	{"M3", "penalty not checked", []edit{
		{"admission/admit/penalty.lua", "if pen > 0 then", "if false then"},
	}, ""},
	{"M4", "Redis error fails open", []edit{
		{"admission/limiter.go", "	return l.fallbackAt(now, c, cost)\n}", "	return Decision{Allowed: true, Source: SourceFallback}\n}"},
	}, ""},
	{"M5", "marketing checks only the global key", []edit{
		{"admission/admit/ceiling.lua", "capped = ARGV[3] ~= '0'", "capped = false"},
	}, ""},
	{"M6", "marketing updates global even when denied", []edit{
		{"admission/admit/global.lua", "if wait > lookahead then", "if g_wait <= 0 then\n  redis.call('SET', KEYS[1], string.format('%d', tat_g + g_int))\nend\nif wait > lookahead then"},
	}, ""},
	{"M7", "penalty shortened", []edit{
		{"admission/penalty.lua", "if cur < want then", "if true then"},
	}, ""},
	{"M8", "keys without hash tag", []edit{
		{"internal/keys/keys.go", `Account("{sms:" + account + "}")`, `Account("sms:" + account)`},
	}, ""},
	{"M9", "fallback at full TARGET_RPS per process", []edit{
		{"admission/fallback.go", "n := float64(cfg.MaxSenders)", "n := 1.0"},
		{"admission/fallback.go", "procs, scale := float64(cfg.MaxSenders), 1.0", "procs, scale := 1.0, 1.0"},
	}, ""},
	{"M10", "Acquire polls on a fixed tick", []edit{
		{"admission/acquire.go", "wait = max(d.RetryAfter, minWait)", "wait = time.Millisecond + 0*max(d.RetryAfter, minWait)"},
	}, ""},
	{"M11", "no circuit: Redis tried on every call while down", []edit{
		{"admission/circuit.go", "c.openUntil = now.Add(c.retryAfter)", "c.openUntil = now"},
	}, ""},
	{"M12", "burst one too many", []edit{
		{"admission/limiter.go", "burst := time.Duration(cfg.Burst - 1)", "burst := time.Duration(cfg.Burst)"},
	}, ""},
	{"M13", "denial does not report its wait", []edit{
		{"admission/admit/global.lua", "    return deny(m_wait, R.CEILING)", "    return {0, 1, R.CEILING, 0, attempts, ''}"},
		{"admission/admit/global.lua", "  return deny(g_wait, R.GLOBAL)", "  return {0, 1, R.GLOBAL, 0, attempts, ''}"},
	}, ""},
	{"M14", "script reply not checked", []edit{
		{"admission/eval.go", "		x, ok := v[i].(int64)\n		if !ok {", "		x, ok := v[i].(int64)\n		if ok && !ok {"},
	}, ""},

	{"M15", "back from fallback without reserving the others' share", []edit{
		{"admission/limiter.go", "	recovering := l.stops.fallback\n", "	recovering := l.stops.fallback && false\n"},
	}, ""},
	{"M16", "marketing may take OTP's reserved slot", []edit{
		{"admission/admit/global.lua", "local g_tau = g_tau0 - reserve\n", "local g_tau = g_tau0\n"},
	}, ""},
	{"M17", "no wake tickets: every waiter wakes when the slot opens", []edit{
		{"admission/admit/wake.lua", "local tickets = ARGV[8]", "local tickets = '0'"},
		{"admission/admit/prelude.lua", "--@deny(wait, reason, detail)\nif ticket then\n", "--@deny(wait, reason, detail)\nif false then\n"},
	}, ""},
	{"M18", "the operator's override is ignored", []edit{
		{"admission/admit/override.lua", "  local o_g, o_m = tonumber(a), tonumber(b)", "  local o_g, o_m = nil, nil"},
	}, ""},
	{"M19", "an override can raise a rate", []edit{
		{"admission/admit/override.lua", "if o_g and o_g > 0 and math.ceil(1000000 / o_g) > g_int then", "if o_g and o_g > 0 then"},
	}, ""},
	{"M20", "the account bursts when a penalty ends", []edit{
		{"admission/penalty.lua", "if (num(redis.call('GET', KEYS[2])) or 0) < tat then", "if false then"},
	}, ""},
	{"L1", "stale leases of dead processes never reclaimed", []edit{
		{"admission/admit/leases.lua", "  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)\n", ""},
	}, ""},
	{"L2", "every lease of a process has the same member", []edit{
		{"admission/eval.go", `call.Lease = l.instance + "-" + strconv.FormatUint(l.leaseSeq.Add(1), 10)`, `call.Lease = l.instance + "-" + strconv.FormatUint(0*l.leaseSeq.Add(1), 10)`},
	}, ""},
	{"L3", "a finished send does not release its lease", []edit{
		{"admission/finish/lease.lua", "  redis.call('ZREM', KEYS[2], unpack(ARGV, 15))", "  -- mutant: leases kept"},
	}, ""},
	{"M21", "cluster clients keep go-redis's 60s slot-map reload", []edit{
		{"admission/cluster.go", "	o.ClusterStateReloadInterval = ClusterStateReloadInterval\n", ""},
	}, ""},
	// The pipeline: each safety step of dispatch, removed.
	{"D1", "a 429 is not shared with the other processes", []edit{
		{"dispatch/send.go", "if terr := a.Limiter.ReportThrottled(context.WithoutCancel(ctx), v.RetryAfter); terr != nil {", "if terr := error(nil); terr != nil {"},
	}, "./dispatch/"},
	{"D2", "an expired message is sent anyway", []edit{
		{"dispatch/pipeline.go", "return !m.Deadline.IsZero() && !d.now().Before(m.Deadline)", "return false"},
	}, "./dispatch/"},
	{"D3", "the send-once record is not consulted", []edit{
		{"admission/admit/record.lua", "  if state ~= '' and state ~= 'claim:' .. token then", "  if false then"},
	}, "./dispatch/"},
	{"D4", "no admission before sending", []edit{
		{"dispatch/pipeline.go", "dec, err := a.Limiter.Admit(actx, class, cost, maxWait-time.Since(start), claim)", "dec, err := admission.Decision{Allowed: true, Tries: int(time.Since(start)), Attempts: len(claim.ID) * 0 * cost}, error(actx.Err())"},
	}, "./dispatch/"},
	{"D5", "a malformed message is acked, not dead-lettered", []edit{
		{"nack/outcome.go", "	case Invalid, Rejected:\n		return DeadLetter", "	case Rejected:\n		return DeadLetter\n	case Invalid:\n		return Ack"},
	}, "./dispatch/"},
	{"D6", "a shutdown acks what it did not send", []edit{
		{"dispatch/pipeline.go", "	case err != nil:\n		t.outcome, t.err = nack.ShuttingDown, err\n", "	case err != nil:\n		t.outcome, t.err = nack.Sent, err\n"},
	}, "./dispatch/"},
	{"D7", "a spent retry budget does not pause pulls", []edit{
		{"dispatch/send.go", "if !d.budget.Allow() && !failover {", "if false && !d.budget.Allow() && !failover {"},
	}, "./dispatch/"},

	// Reliability faults (R): each fix, undone.
	{"R1", "a refusal is recorded final before its dead letter is out", []edit{
		{"dispatch/settle.go", "		return ledger.RefusedRecord(t.err.Error())", "		return ledger.RecordRejected"},
	}, "./dispatch/"},
	{"R2", "a claim's lifetime under 1 ms: SET PX <= 0 fails after the TATs are written", []edit{
		{"admission/admit/record.lua", "math.ceil(wait / 1000) + math.max(tonumber(ARGV[17]), 1)", "math.ceil(wait / 1000) + tonumber(ARGV[17])"},
	}, ""},
	{"R3", "the send-once claims ignore the Redis circuit", []edit{
		{"admission/claim.go", "	err := c.circuit.do(ctx, c.timeout, func(ctx context.Context) (err error) {\n		call := claimCall{", "	err := (*Circuit)(nil).do(ctx, c.timeout, func(ctx context.Context) (err error) {\n		call := claimCall{"},
	}, ""},
	{"R4", "a duplicate waits for a first copy that expired and acks unsent", []edit{
		{"dispatch/pipeline.go", "	default:\n		f.end = endUnsent\n", "	default:\n		f.end = endFinished\n"},
	}, "./dispatch/"},
	{"R5", "a claim cut off by its context is not given back", []edit{
		{"admission/eval.go", "				l.claims.Release(context.WithoutCancel(ctx), claim.ID, claim.Token)", "				l.claims.keep(claimRef{claim.ID, claim.Token})"},
	}, ""},
	{"R6", "a send cut off by the shutdown's grace counts as a provider failure", []edit{
		{"dispatch/send.go", "	case v.Outcome == nack.Transient && d.hard.Err() != nil:\n", "	case v.Outcome == nack.Transient && d.hard.Err() != nil && false:\n"},
	}, "./dispatch/"},
	{"R8", "a lease whose admission reply was lost is not released", []edit{
		{"admission/eval.go", "			if lease != \"\" {\n				l.orphan(lease)", "			if false {\n				l.orphan(lease)"},
	}, ""},
	{"R9", "a caller that never asked reports a made-up Redis denial", []edit{
		{"admission/acquire.go", "	return Decision{Source: SourceNone, Reason: why}", "	return Decision{Source: SourceRedis, Reason: ReasonGlobal, RetryAfter: time.Millisecond}"},
	}, ""},
	{"R10", "a cleared override leaves its debt at the configured rate", []edit{
		{"admission/override.lua", "  if from ~= to and tat > now then", "  if false then"},
	}, ""},

	// Real providers: segments and account-level failures.
	{"P1", "an account failure is dead-lettered like a refused message", []edit{
		{"nack/outcome.go", "	if a, ok := errors.AsType[accountFailer](err); ok && a.AccountFailure() {\n		return AccountFailure\n	}\n", ""},
	}, "./dispatch/"},
	{"P2", "an account failure does not pause the account", []edit{
		{"dispatch/send.go", "	perr := a.Limiter.ReportAccountFailure(context.WithoutCancel(ctx), d.cfg.AccountPause, why)", "	perr := error(nil)"},
	}, "./dispatch/"},
	{"P3", "a fixed credential file does not end the pause", []edit{
		{"dispatch/dispatcher.go", "		if err := a.Limiter.ResumeAccount(ctx); err != nil {", "		if err := error(nil); err != nil {"},
	}, "./dispatch/"},
	{"P4", "a send of several units is charged one", []edit{
		{"admission/admit/global.lua", "tat_g = math.max(tat_g, at) + cost * g_int", "tat_g = math.max(tat_g, at) + g_int"},
	}, ""},
	{"P5", "a long message is sent in the Redis-down fallback", []edit{
		{"admission/lease.go", "	if cost > 1 {\n		return Decision{RetryAfter: l.cfg.RedisRetryAfter, Source: SourceFallback, Reason: ReasonLong}\n	}\n", ""},
	}, ""},
	{"P6", "an account pause lapses while Redis cannot be asked", []edit{
		{"admission/stops.go", "	case s.pause.live(now):\n		return s.pauseUnchecked(now), true, false\n", "	case false:\n		return s.pauseUnchecked(now), true, false\n"},
	}, ""},
	{"P7", "an account pause does not stop the pulls", []edit{
		{"dispatch/lane.go", "		l.paused, l.held = true, true\n		l.cancel()\n", "		_ = true\n"},
	}, "./dispatch/"},
	{"P8", "rates in segments charge one unit a message", []edit{
		{"dispatch/accounts.go", "	if a.RateUnit == PerSegment {\n		return segments\n	}", "	if a.RateUnit == PerSegment {\n		return 1\n	}"},
	}, "./dispatch/"},
	{"P9", "a throttle in a 200 body counts as a 2xx", []edit{
		{"telemetry/tracing.go", "				throttled = rep.Err.Throttled()", "				throttled = false"},
	}, "./telemetry/"},
	{"P10", "a fixed credential ends a 429's penalty too", []edit{
		{"admission/resume.lua", "if not why or string.sub(why, 1, #ARGV[2]) ~= ARGV[2] then", "if not why then"},
	}, ""},

	// Two calls a message: the claim taken with the slot, the record with
	// the lease's end, and slots booked a little ahead.
	{"F1", "a denial writes the claim", []edit{
		{"admission/admit/prelude.lua", "--@deny(wait, reason, detail)\n", "--@deny(wait, reason, detail)\nif ARGV[16] ~= '' then\n  redis.call('SET', KEYS[9], 'claim:' .. ARGV[16], 'PX', 60000)\nend\n"},
	}, ""},
	{"F2", "a duplicate takes a slot", []edit{
		{"admission/admit/record.lua", "    return stop(0, R.RECORD, state)", "    redis.call('SET', KEYS[1], string.format('%d', math.max(tonumber(s[1]) or 0, now) + tonumber(ARGV[1])))\n    return stop(0, R.RECORD, state)"},
	}, ""},
	{"F3", "a booked slot's TAT counts from the call, not from the slot", []edit{
		{"admission/admit/global.lua", "tat_g = math.max(tat_g, at) + cost * g_int", "tat_g = math.max(tat_g, now) + cost * g_int"},
	}, ""},
	{"F4", "a booked slot is sent before it opens", []edit{
		{"admission/acquire.go", "	if d.RetryAfter > 0 {\n", "	if d.RetryAfter > 0 && false {\n"},
	}, ""},
	{"F5", "slots are booked without bound", []edit{
		{"admission/acquire.go", "		lookahead := min(within, l.lookahead(c, cost))", "		lookahead := within"},
	}, ""},
	{"F6", "the probe after a penalty does not go alone", []edit{
		{"admission/admit/penalty.lua", "if s[7] then\n  lookahead = 0\nend", "if false then\n  lookahead = 0\nend"},
	}, ""},
	{"F7", "a booked slot is sent after a 429 this process heard of", []edit{
		{"admission/acquire.go", "		if p, stop := l.stopped(); stop {", "		if p, stop := l.stopped(); stop && false {"},
	}, ""},
	{"F8", "a given-back claim loses its count of sends", []edit{
		{"admission/finish/record.lua", "  elseif count then", "  elseif false then"},
	}, ""},
	{"A1", "an OTP overflows for its account's ordinary rate", []edit{
		{"dispatch/accounts.go", "(dec.Reason == admission.ReasonPenalty || dec.Reason == admission.ReasonAccount ||", "(dec.Reason == admission.ReasonPenalty || dec.Reason == admission.ReasonGlobal || dec.Reason == admission.ReasonAccount ||"},
	}, "./dispatch/"},
	{"A2", "a sender's slot does not wait for a long message's whole cost", []edit{
		{"admission/admit/pool.lua", "    local w = tat + (cost - 1) * iv - now", "    local w = tat - now"},
	}, ""},
	{"A3", "a sender's TAT does not move", []edit{
		{"admission/admit/pool.lua", "redis.call('SET', KEYS[senders] .. pick, string.format('%d', v),", "redis.call('SET', KEYS[senders] .. pick, string.format('%d', s_tat),"},
	}, ""},
	{"S1", "the pool takes a sender out of order (its index's last, not its first)", []edit{
		{"admission/admit/pool.lua", "redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')", "redis.call('ZRANGE', KEYS[k], -1, -1, 'WITHSCORES')"},
	}, ""},
	{"S2", "a sender above its rate: its index's score taken for its TAT", []edit{
		{"admission/admit/pool.lua", "tat = math.max(num(redis.call('GET', KEYS[senders] .. m)) or 0, pfloor)", "tat = math.max(num(top[2]) or 0, pfloor)"},
	}, ""},
	{"A4", "the learned rate climbs above the target", []edit{
		{"admission/admit/search.lua", "  r = math.max(math.min(r, a_target), a_min)", "  r = math.max(r, a_min)"},
	}, ""},
	{"A6", "marketing overflows too", []edit{
		{"dispatch/accounts.go", "return d.policy(class).FailsOver || slices.Contains(a.FailoverClasses, class)", "return true || slices.Contains(a.FailoverClasses, class)"},
	}, "./dispatch/"},
	{"A7", "the learned rate climbs without pressure", []edit{
		{"admission/admit/search.lua", "if searching and now >= lrn.next and lrn.pressed then", "if searching and now >= lrn.next then"},
	}, ""},
	{"K1", "a later class books past an earlier one (no rank reserves)", []edit{
		{"admission/classes.go", "		a.Reserve = (min(burst, time.Duration(i)) * gi).Microseconds()", "		a.Reserve = 0"},
		{"admission/classes.go", "			rank := time.Duration(i - lv.members[0])", "			rank := time.Duration(0 * (i - lv.members[0]))"},
	}, ""},
	{"K2", "a middle class books a whole interval of its own ahead", []edit{
		{"admission/acquire.go", "		la = min(la, time.Duration(lookaheadSlots*cost)*l.lastSpacing)", "		la = max(la, time.Duration(lookaheadSlots*cost)*l.lastSpacing)"},
	}, ""},
	{"K3", "a class's ceiling is not applied", []edit{
		{"admission/admit/ceiling.lua", "if capped then\n  m_wait = tat_m - now - m_tau\nend", "if false then\n  m_wait = tat_m - now - m_tau\nend"},
	}, ""},
	{"K4", "an earlier class's reserve is not applied", []edit{
		{"admission/admit/reserves.lua", "  r_wait = math.max(r_wait, v.tat - now - (v.tau - v.reserve))", "  r_wait = math.max(r_wait, -1)"},
	}, ""},
	{"A5", "a 429 does not lower the learned rate", []edit{
		{"admission/penalty.lua", "if ARGV[3] == 'throttled' and ARGV[4] ~= '' then", "if false then"},
	}, ""},
	{"O1", "a replay's forget clears a sent record", []edit{
		{"admission/forget.lua", "(state == 'rejected' or string.sub(state, 1, 8) == 'refused:')", "true"},
	}, ""},
	{"O2", "replay ignores the id's record and republishes a sent id", []edit{
		{"deadletter/replay.go", "	return recs.Forget(ctx, id)", "	recs.Forget(ctx, id)\n	return ledger.Record{State: ledger.Unrecorded}, false, nil"},
	}, "./deadletter/"},
	{"O3", "replay acks a dead letter before its republish", []edit{
		{"deadletter/replay.go", "	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayPublishTimeout)", "	p.r.ack(ctx, dl)\n	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayPublishTimeout)"},
	}, "./deadletter/"},
	{"O4", "list consumes what it read", []edit{
		{"deadletter/subscription.go", "	r.modack(ctx, ids, 0)\n", "	r.ackIDs(ctx, ids)\n"},
	}, "./deadletter/"},
	{"O5", "status writes to the account's keys", []edit{
		{"status/status.lua", "local t = redis.call('TIME')", "redis.call('SET', KEYS[1] .. ':seen', 1)\nlocal t = redis.call('TIME')"},
	}, "./status/"},
	{"O6", "the call after a send counts nothing", []edit{
		{"admission/finish/sent.lua", "if units > 0 and redis.call('INCRBY', KEYS[3], units) == units then", "if false then"},
	}, "./status/"},
	{"HB1", "MAX_SEGMENTS unset is 6 whatever the rates", []edit{
		{"config/validate.go", "			a.MaxSegments = a.fittingSegments(p)", "			a.MaxSegments = defaultMaxSegments"},
	}, "./config/"},
	{"HB2", "RATE_UNIT defaults to message with twilio and vonage", []edit{
		{"config/validate.go", "	if provider == \"twilio\" || provider == \"vonage\" {", "	if false {"},
	}, "./config/"},
	{"HB3", "one provider account under two names in the accounts file", []edit{
		{"config/accounts.go", "		if j, ok := owners[id]; ok {", "		if j, ok := owners[id]; ok && false {"},
	}, "./config/"},
	{"HA1", "an override or a learned rate below the minimum is in force", []edit{
		{"admission/admit/override.lua", "  o_g, o_m = rate(o_g), rate(o_m) -- 0, or one ignored: that rate is not overridden\n", ""},
		{"admission/admit/learned.lua", "  lrn = {rate = rate(r),", "  lrn = {rate = tonumber(r),"},
	}, ""},
	{"HE1", "a subscription without an answer from Pub/Sub never makes the pod unready", []edit{
		{"internal/pullwatch/watch.go", "return d, d >= Silence", "return d, false"},
	}, "./internal/pullwatch/"},
	{"HC1", "replay believes the class attribute of a letter Pub/Sub forwarded", []edit{
		{"deadletter/format.go", "	if src, forwarded := l.Attributes[sourceSubscriptionAttr]; forwarded {", "	if src, forwarded := l.Attributes[sourceSubscriptionAttr]; forwarded && l.Attributes[attr.Class] == \"\" {"},
	}, "./deadletter/"},
	{"HC2", "a panic in the message handler is not recovered", []edit{
		{"dispatch/pipeline.go", "		if r := recover(); r != nil {\n			d.recoverPanic(", "		if r := any(nil); r != nil {\n			d.recoverPanic("},
	}, "./dispatch/"},
	{"HF1", "an evicting maxmemory-policy goes unreported", []edit{
		{"internal/redisconn/policy.go", "	case admission.Evicts(policy):", "	case false && admission.Evicts(policy):"},
	}, "./internal/redisconn/"},
	{"HD1", "a 429's Retry-After is not capped by MaxRetryAfter", []edit{
		{"admission/penalty.go", "		retryAfter = l.cfg.MaxRetryAfter\n", ""},
	}, ""},
	{"HD2", "a cleared 429 penalty is not seen by the other processes", []edit{
		{"admission/stops.go", "if s.penalty.live(now) && (!s.penalty.shared || now.Sub(s.penalty.checked) < penaltyRecheck) {", "if s.penalty.live(now) {"},
	}, ""},
	{"HD3", "a caller waiting through a 429 penalty does not ask again", []edit{
		{"admission/acquire.go", "		wait = min(wait, penaltyRecheck) // it may be cleared meanwhile\n", ""},
	}, ""},
	{"FA1", "a degraded account still admits every send", []edit{
		{"admission/admit/health.lua", "  if now < due then\n", "  if false then\n"},
	}, ""},
	{"FA2", "a degraded home still takes OTP (no failover)", []edit{
		{"dispatch/accounts.go", "dec.Reason == admission.ReasonAccount ||\n\t\tdec.Reason == admission.ReasonDegraded)", "dec.Reason == admission.ReasonAccount)"},
	}, "./dispatch/"},
	{"FA4", "a degraded account's probes are not spaced", []edit{
		{"admission/admit/health.lua", "if health == 2 then\n  -- This send is the probe", "if false then\n  -- This send is the probe"},
	}, ""},
	{"FA5", "a destination served by the wrong account", []edit{
		{"dispatch/route.go", "if len(p) >= len(d) && p[:len(d)] == d {", "if true {"},
	}, "./dispatch/"},
	{"FA6", "longest_prefix ignored", []edit{
		{"dispatch/route.go", "if t.mode == RouteLongestPrefix {", "if false {"},
	}, "./dispatch/"},
	{"RC1", "a receipt's final state overwritten by an intermediate one", []edit{
		{"ledger/receipt/fold.lua", "if cur and (cur == 'delivered' or (FINAL[cur] and status ~= 'delivered') or", "if cur and ((cur == 'delivered' and FINAL[status]) or (FINAL[cur] and FINAL[status] and status ~= 'delivered') or"},
		{"ledger/receipt/fold.lua", "if (FINAL[old] and new ~= 'delivered') or", "if (FINAL[old] and FINAL[new] and new ~= 'delivered') or"},
	}, "./ledger/"},
	{"RC2", "an owed status event never recorded as owed", []edit{
		{"ledger/receipt/fold.lua", "  -- The owed set's lifetime is set by the sweeps and flushes.\n  redis.call('ZADD', KEYS[2], now, member(id, h.ov))\n", "  -- The owed set's lifetime is set by the sweeps and flushes.\n"},
	}, "./ledger/"},
	{"RC3", "a later failure receipt overwrites delivered", []edit{
		{"ledger/receipt/fold.lua", "if cur and (cur == 'delivered' or (FINAL[cur] and status ~= 'delivered') or", "if cur and ((cur == 'delivered' and not FINAL[status]) or (FINAL[cur] and cur ~= 'delivered' and status ~= 'delivered') or"},
		{"ledger/receipt/fold.lua", "if (FINAL[old] and new ~= 'delivered') or", "if (FINAL[old] and old ~= 'delivered' and new ~= 'delivered') or"},
	}, "./ledger/"},
	{"RC4", "an older event's publication clears the event owed since", []edit{
		{"ledger/receipt/owed.lua", "  if num(v) <= 1 then", "  if true then"},
	}, "./ledger/"},
	{"RC5", "a resend whose publish failed is not given back: lost", []edit{
		{"ledger/giveback.lua", "h.resend = ARGV[2]\n", ""},
	}, "./ledger/"},
	{"RC6", "publications noted for a failed call are dropped", []edit{
		{"ledger/receipt.go", "	g.published = append(call.Published, g.published...)", "	g.published = append(g.published[:0:0], g.published...)"},
	}, "./ledger/"},
	{"RV1", "a Twilio receipt read without checking its signature", []edit{
		{"provider/receipt_twilio.go", "	if ok != 1 {", "	if false {"},
	}, "./provider/"},
	{"RV2", "a Vonage receipt read without checking its signature", []edit{
		{"provider/receipt_vonage.go", "	if !hexMACEqual(sign([]byte(secret), vonageJoined(params)), sig) {", "	if _ = sign; false {"},
	}, "./provider/"},
	{"RV3", "a generic receipt read without checking its signature", []edit{
		{"provider/receipt_client.go", "	if !hexMACEqual(mac.Sum(nil), sig) {", "	if false {"},
	}, "./provider/"},
	{"RE1", "an owed status event marked published before it is out", []edit{
		{"receipts/events.go", "	if f.Resend != nil {\n", "	a.Ledger.EventPublished(f.ID)\n\tif f.Resend != nil {\n"},
	}, "./receipts/"},
	{"RD1", "a resend sent through the account that sent the original", []edit{
		{"dispatch/resend.go", "	return avoiding(r, avoid), resendReason(", "	return avoiding(r, avoid[:0]), resendReason("},
	}, "./dispatch/"},
	{"RD2", "a resend claims the original's send-once record", []edit{
		{"dispatch/message.go", "		return ledger.ResendID(m.ID)\n", "		return ledger.ResendID(m.ID)[:len(m.ID)]\n"},
	}, "./dispatch/"},
	{"RS1", "a route whose OTPs stop arriving is never skipped", []edit{
		{"ledger/receipt/route.lua", "  if not skipped and numbers >= rule.least and got < rule.ratio * (got + fails) then", "  if false then"},
	}, ""},
	{"RS2", "a route's skip ignores the prefix: every prefix is skipped", []edit{
		{"ledger/receipt/route.lua", "local key, skip = pre .. 'route:' .. prefix, pre .. 'skip:' .. prefix", "local key, skip = pre .. 'route:' .. prefix, pre .. 'skip:'"},
		{"admission/eval.go", "		call.Skip = l.skipKey(claim.Prefix)\n", "		call.Skip = l.skipKey(\"\")\n"},
	}, ""},
	{"RS3", "an OTP to a skipped route waits at home (no failover)", []edit{
		{"dispatch/accounts.go", "	if dec.Reason == admission.ReasonRouteSkipped {", "	if false {"},
	}, "./dispatch/"},
	{"RS4", "a skipped route's probes are not spaced", []edit{
		{"admission/admit/route.lua", "if route_due then\n  -- This send is the route's probe", "if false then\n  -- This send is the route's probe"},
	}, ""},
	{"RC7", "a full memory of owed events leaves a new one owed forever", []edit{
		{"ledger/receipt.go", "		case !ok:\n", "		case !ok && len(g.owedSeen) < maxOwedRemembered:\n"},
	}, "./ledger/"},
	{"RC8", "a story dated by finish.lua's clock, not its admission's slot", []edit{
		{"admission/finish/story.lua", "  local sent = math.min(tonumber(ARGV[13]) or 0, 2 ^ 53 - 1)\n", "  local sent = 0\n"},
	}, ""},
	{"RC9", "a failure turned delivered leaves its failure's event owed too", []edit{
		{"ledger/receipt/fold.lua", "    redis.call('ZREM', KEYS[2], member(id, before))\n", ""},
	}, "./ledger/"},
	{"RC10", "a later part's key names the message, not its first part: its receipts find no story", []edit{
		{"admission/finish/story.lua", "      redis.call('SET', KEYS[i], (i - 6) .. first, 'PX', life)\n", "      redis.call('SET', KEYS[i], (i - 6) .. ':' .. ARGV[7], 'PX', life)\n"},
	}, ""},
	{"RC11", "a resend's story, its record another id's, kept without the id's key: read by id, it is not found", []edit{
		{"admission/settle.go", "	if !d.Claimed || d.claim.ID != id || !named {\n", "	if !d.Claimed || !named {\n"},
	}, ""},
	{"RC12", "the delivery counts kept with no flush on a timer: they wait for the next receipt, however late", []edit{
		{"ledger/counts.go", "	g.armCounts(countsEvery)\n", ""},
	}, "./ledger/"},
	{"RE3", "a stopping process that published nothing keeps its delivery counts: they are lost", []edit{
		{"receipts/sweep.go", "	if !a.pending.Swap(false) && !stopping {\n", "	if !a.pending.Swap(false) {\n"},
	}, "./receipts/"},
	{"RC13", "a sweep's call carries the published events only as a receipt's does: it returns events already out", []edit{
		{"ledger/receipt.go", "	if call.Status == \"\" || time.Since(g.cleared) >= clearEvery {\n", "	if time.Since(g.cleared) >= clearEvery {\n"},
	}, "./ledger/"},
	{"RE2", "a receipt posted before its send's record is lost", []edit{
		{"receipts/handler.go", "	for _, wait := range earlyWaits {\n", "	for _, wait := range earlyWaits[:0] {\n"},
	}, "./receipts/"},
	{"M22", "wake tickets one interval apart whatever the sends' cost", []edit{
		{"admission/admit/wake.lua", "  put_wake(KEYS[4], w + units * spacing, ", "  put_wake(KEYS[4], w + spacing, "},
	}, ""},
	{"M24", "an earlier class's send does not push the later classes' shadow of the global TAT", []edit{
		{"admission/admit/pushes.lua", "      g = g + cost * g_int -- every later class shares the global level\n", ""},
	}, ""},
	{"M25", "tickets do not wait for the global level's shadow", []edit{
		{"admission/admit/wake.lua", "    w = math.max(w, g - (g_tau0 - reserve))\n", ""},
	}, ""},
	{"M26", "a class at the account's rate waits for the global level's shadow too", []edit{
		{"admission/admit/wake.lua", "  if spacing > g_int then\n", "  if spacing >= g_int then\n"},
	}, ""},
	{"M23", "the ticket of the queued is for the costliest of them (late)", []edit{
		{"admission/acquire.go", "		if next == 0 || cost < next {\n", "		if next == 0 || cost > next {\n"},
	}, ""},
	{"HR1", "a beat reads every idle account's health", []edit{
		{"status/heartbeat.go", "			b.next = n + 1\n			return\n", "			b.next = n + 1\n"},
	}, "./status/"},
	{"HR2", "an idle account's health never read", []edit{
		{"status/heartbeat.go", "		if asked, _ := b.lims[n].RefreshHealth(ctx, heartbeatEvery); asked {", "		if asked := false; asked {"},
	}, "./status/"},
	{"HR3", "a reply's health not dated: idle accounts read though told", []edit{
		{"admission/health.go", "	l.healthAt.Store(l.clock.Now().UnixNano())\n", ""},
	}, "./status/"},
	{"HR4", "a silent process never dropped from the registry", []edit{
		{"status/heartbeat.lua", "local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - keep * 1000)", "local gone = {}"},
	}, "./status/"},
	{"HR5", "status ignores an older process's beat on the account's keys", []edit{
		{"status/report.go", "st.Processes = append(st.Processes, byAccount[s.Name]...)", "st.Processes = byAccount[s.Name]"},
	}, "./status/"},
	{"M30", "a success admitted while healthy is not reported: another process's run of failures goes on", []edit{
		{"admission/health.go", "\tcase r == ResultOK:\n\t\treturn \"ok\"", "\tcase r == ResultOK && admitted != Healthy:\n\t\treturn \"ok\""},
	}, ""},
	{"M31", "a number read from Redis unguarded: a 'nan' TAT admits once, then locks the account", []edit{
		{"internal/luapart/num.lua", "local function num(v)\n  v = tonumber(v)\n  if v and v >= 0 and v <= 2 ^ 53 - 1 then", "local function num(v)\n  v = tonumber(v)\n  if v then"},
	}, ""},
	{"M28", "a resend kept in the story and handed out again by every sweep while its event is owed", []edit{
		{"ledger/receipt/fold.lua", "      h.resent = '1'\n", "      h.resend, h.resent = resend, '1'\n"},
		{"ledger/receipt/sweep.lua", "          h.resend = nil -- taken: handed out once\n", ""},
	}, "./receipts/"},
	{"M28b", "a fold held for its event keeps its resend: every retry publishes it again", []edit{
		{"receipts/events.go", "\t\tf.Resend = nil // out once: never again from this fold\n", ""},
		{"receipts/handler.go", "\t\t\tif f.Resend == nil {\n\t\t\t\ta.hold(f)", "\t\t\tif true {\n\t\t\t\ta.hold(f)"},
	}, "./receipts/"},
	{"M29", "a resend handed out past its window", []edit{
		{"receipts/events.go", "	if now := s.now(); !s.resendDue(f, now) {", "	if now := s.now(); false {"},
	}, "./receipts/"},
	{"M32", "every failure of an OTP counts against its route, a handset's and a number's too", []edit{
		{"ledger/receipt/route.lua", "  if not prefix or not (delivered or ARGV[9] == '1') then", "  if not prefix then"},
	}, ""},
	{"M32b", "the last account of a route is skipped too: its OTPs wait for the probe", []edit{
		{"admission/eval.go", "claim.Prefix != \"\" && claim.Failover {", "claim.Prefix != \"\" {"},
	}, ""},
	{"M27", "an OTP whose home hangs is never hedged: it waits out SEND_TIMEOUT", []edit{
		{"dispatch/pipeline.go", "	claim.Hedged = claim.Failover && d.hedges(class, r)\n", "	claim.Hedged = false\n"},
	}, "./dispatch/"},
	{"M27b", "a failure of a send begun before the account's recovery counts against it", []edit{
		{"admission/finish/health.lua", "elseif began < since or (mode == 'd' and ok > 0 and began < start) then", "elseif false then"},
	}, ""},
}
