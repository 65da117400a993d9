package admission

// The reply's layout and reason codes, the one table of each that the
// parts and parseDecision follow, and the composer's rewrites of a part's
// source before it is composed: each reply(...) written as the table it
// stands for, each R.<name> as its code, and each return of stop or deny
// as the prelude's lines (compose.go composes the rewritten parts).

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The reply's fields, in order: the one table the script's reply() and
// parseDecision both follow.
const (
	replyAllowed  = iota // 1 when a slot was taken (and the claim, if asked), 0 when denied
	replyWait            // allowed: µs until the booked slot opens (0: now); denied: until the caller should ask again
	replyReason          // a code of admitReasons
	replyNext            // allowed with tickets '2': when to ask for the next message (may be <= 0: at once); else 0
	replyAttempts        // the sends of the id counted before this one
	replyDetail          // ACCOUNT: the pause's why; RECORD: 'held' or the record; else ''
	replySender          // allowed with a pool: the From of the sender taken; else ''
	replyLearned         // the learned rate in force, in thousandths of a unit per second (0: none)
	replyIgnored         // what was read from Redis and ignored (ignoredOverride, ignoredLearned)
	replyHealth          // the account's Health
	replySlot            // allowed: when the booked slot opens, on Redis's clock (µs since the epoch), which dates the send's story; denied: 0
	replyLen
)

// admitReply names each field in Lua: a parameter of reply(), or (param
// false) the prelude's shared state of that name.
var admitReply = [replyLen]struct {
	lua   string
	param bool
}{
	replyAllowed: {"allowed", true}, replyWait: {"wait_us", true}, replyReason: {"reason", true},
	replyNext: {"next_us", true}, replyAttempts: {"attempts", false}, replyDetail: {"detail", true},
	replySender: {"sender", true}, replyLearned: {"learned", false}, replyIgnored: {"ignored", false},
	replyHealth: {"health", false}, replySlot: {"slot_us", true},
}

// The reply's reason codes.
const (
	codeAllowed = iota
	codePenalty
	codeGlobal
	codeCeiling
	codeInFlight
	codeAccount
	codeRecord
	codeSender
	codeDegraded
	codeRouteSkipped
	codeReserve
	codePoolMissing
	codeLen
)

// admitReasons names each code in Lua (R.<name>) and gives the Decision's
// Reason and Source of a denial with it. POOL_MISSING decides nothing: the
// caller builds the pool's index and asks again.
var admitReasons = [codeLen]struct {
	lua    string
	reason Reason
	source Source
}{
	codeAllowed:      {"ALLOWED", ReasonNone, SourceRedis},
	codePenalty:      {"PENALTY", ReasonPenalty, SourcePenalty},
	codeGlobal:       {"GLOBAL", ReasonGlobal, SourceRedis},
	codeCeiling:      {"CEILING", ReasonCeiling, SourceRedis},
	codeInFlight:     {"IN_FLIGHT", ReasonInFlight, SourceRedis},
	codeAccount:      {"ACCOUNT", ReasonAccount, SourcePenalty},
	codeRecord:       {"RECORD", ReasonRecord, SourceRedis},
	codeSender:       {"SENDER", ReasonSender, SourceRedis},
	codeDegraded:     {"DEGRADED", ReasonDegraded, SourceRedis},
	codeRouteSkipped: {"ROUTE_SKIPPED", ReasonRouteSkipped, SourceRedis},
	codeReserve:      {"RESERVE", ReasonReserve, SourceRedis},
	codePoolMissing:  {"POOL_MISSING", ReasonNone, SourceRedis},
}

// replyLua returns what the prelude's "--@reply" line stands for: a
// comment naming the reply's fields and the reason codes. A part's
// reply(<the params of admitReply, in order>) is written as the table it
// stands for (replyCalls): a function would be made anew on every call.
func replyLua() string {
	var b strings.Builder
	b.WriteString("-- The reply's layout and reason codes (rewrite.go's tables): reply(")
	var params []string
	for _, f := range admitReply {
		if f.param {
			params = append(params, f.lua)
		}
	}
	fmt.Fprintf(&b, "%s) is {%s};", strings.Join(params, ", "), strings.Join(replyFields(params), ", "))
	for code, r := range admitReasons {
		fmt.Fprintf(&b, " %s %d", r.lua, code)
	}
	b.WriteString("\n\n") // a blank line: no helper's comment (luapart.Prune)
	return b.String()
}

// replyFields returns the reply's fields in order, the params of reply()
// given as args, the others the prelude's shared state of their name.
func replyFields(args []string) []string {
	var fields []string
	for _, f := range admitReply {
		if f.param {
			f.lua, args = args[0], args[1:]
		}
		fields = append(fields, f.lua)
	}
	return fields
}

var replyCall = regexp.MustCompile(`\breply\(([^()]*)\)`)

// replyCalls writes each reply(...) of src as the table it stands for.
func replyCalls(src string) string {
	params := 0
	for _, f := range admitReply {
		if f.param {
			params++
		}
	}
	return replyCall.ReplaceAllStringFunc(src, func(call string) string {
		args := strings.Split(replyCall.FindStringSubmatch(call)[1], ",")
		if len(args) != params {
			panic(fmt.Sprintf("admit: %s: want %d arguments", call, params))
		}
		for i := range args {
			args[i] = strings.TrimSpace(args[i])
		}
		return "{" + strings.Join(replyFields(args), ", ") + "}"
	})
}

// reasonRef is how the parts name a reason code: R.<name> of admitReasons,
// which the composer writes as its number (a table built on every call
// would cost a call's time for nothing).
var reasonRef = regexp.MustCompile(`\bR\.([A-Z_]+)\b`)

// reasonCodes replaces each R.<name> of src with its code.
func reasonCodes(src string) string {
	return reasonRef.ReplaceAllStringFunc(src, func(ref string) string {
		name := ref[2:]
		for code, r := range admitReasons {
			if r.lua == name {
				return strconv.Itoa(code)
			}
		}
		panic("admit: no reason code " + name)
	})
}

// The ends of a call that takes no slot, as the prelude writes them
// between its "--@deny(wait, reason, detail)", "--@stop(...)" and "--@end"
// lines: each part's return of one is written as these lines in place.
const (
	denyMark = "--@deny(wait, reason, detail)\n"
	stopMark = "--@stop(wait, reason, detail)\n"
	endMark  = "--@end\n"
)

// cutEnds returns the prelude without its ends, and the lines deny and
// stop stand for (deny's run on into stop's).
func cutEnds(prelude string) (rest string, ends map[string]string) {
	d := strings.Index(prelude, denyMark)
	st := strings.Index(prelude, stopMark)
	e := strings.Index(prelude, endMark)
	if d < 0 || st < d || e < st || strings.Count(prelude, denyMark)+strings.Count(prelude, stopMark)+strings.Count(prelude, endMark) != 3 {
		panic("admit/prelude.lua: want one --@deny, --@stop and --@end, in that order")
	}
	stop := prelude[st+len(stopMark) : e]
	ends = map[string]string{"deny": prelude[d+len(denyMark):st] + stop, "stop": stop}
	return prelude[:d] + prelude[e+len(endMark):], ends
}

var endCall = regexp.MustCompile(`\breturn (deny|stop)\(`)

// endCalls writes each "return deny(...)" and "return stop(...)" of src
// (outside comments) as the lines of ends it stands for, indented as the
// call is, after a line making the call's arguments the locals wait,
// reason and detail (nil when the call gives two).
func endCalls(name, src string, ends map[string]string) string {
	var b strings.Builder
	for {
		m := endCall.FindStringSubmatchIndex(src)
		if m == nil {
			b.WriteString(src)
			return b.String()
		}
		line := src[strings.LastIndexByte(src[:m[0]], '\n')+1 : m[0]]
		if strings.Contains(line, "--") { // in a comment
			b.WriteString(src[:m[1]])
			src = src[m[1]:]
			continue
		}
		args, n := callArgs(src[m[1]:])
		if n < 0 || len(args) < 2 || len(args) > 3 {
			panic(fmt.Sprintf("%s: %s...: want (wait, reason[, detail])", name, src[m[0]:m[1]]))
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		b.WriteString(src[:m[0]])
		b.WriteString("local wait, reason, detail = " + strings.Join(args, ", "))
		for l := range strings.Lines(strings.TrimSuffix(ends[src[m[2]:m[3]]], "\n")) {
			b.WriteString("\n" + indent + strings.TrimSuffix(l, "\n"))
		}
		src = src[m[1]+n:]
	}
}

// callArgs returns the arguments of the call whose "(" src follows, each
// trimmed, and the length of src up to and with its ")" (-1 when it has
// none). Commas within brackets or strings do not split them.
func callArgs(src string) (args []string, n int) {
	depth, from := 0, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return append(args, strings.TrimSpace(src[from:i])), i + 1
			}
			depth--
		case ',':
			if depth == 0 {
				args, from = append(args, strings.TrimSpace(src[from:i])), i+1
			}
		}
	}
	return nil, -1
}
