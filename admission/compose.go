package admission

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"regexp"

	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/scriptop"
)

// The admission script is composed at start-up from parts, one Lua file
// per mechanism in admit/ (docs/design.md, "The admission script"): the
// prelude (Redis's clock, the shared helpers, one MGET, the state the
// parts share), then each phase of the decision, and in each phase the
// section of each part in admitParts' order. A part a class's call cannot
// use is left out: each set of parts is a script of its own, with its
// own SHA. The call stays one EVALSHA per admission.
//
//go:embed admit/*.lua
var embeddedParts embed.FS

// partFiles holds the parts' files; the mutation check reads them from a
// copy instead (mutate_test.go).
var partFiles fs.FS = mustSub(embeddedParts, "admit")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// admitPhases are the phases of an admission, in order: each part's file
// marks its sections with a line "-- @<phase>".
var admitPhases = []string{
	"read",   // what Redis holds, parsed
	"claim",  // the id's record: a duplicate takes nothing
	"scale",  // the rates in force: the override, the learned rate
	"check",  // a stop: penalty, pause, degraded account, skipped route
	"wait",   // each level's wait for its slot
	"decide", // the slot, or a denial by the level that binds
	"lease",  // the in-flight limit
	"commit", // each level's TAT moved past the slot
	"write",  // one MSET
	"after",  // the probes' and the claim's keys
	"reply",  // the answer
}

// A partSet says which optional parts a script holds.
type partSet uint16

// The optional parts; every other part is in every script. Some follow
// the configuration, others the call: a call that asks for no ticket,
// takes no claim, has no recovery floor or names no route runs a script
// without those parts.
const (
	withCeiling  partSet = 1 << iota // ceiling.lua: the class has a ceiling
	withReserves                     // reserves.lua: the class is held to an earlier class's reserve
	withPushes                       // pushes.lua: later classes' tickets to push
	withSearch                       // search.lua: the account learns its rate
	withPool                         // pool.lua: the account has a sender pool
	withLeases                       // leases.lua: MaxInFlight
	withRecord                       // record.lua: the call takes the id's claim
	withTickets                      // wake.lua: the call asks for wake tickets
	withFloor                        // floor.lua: the call comes back from the fallback
	withRoute                        // route.lua: the call names a route's skip
	allParts     = 1<<iota - 1
)

// admitParts are the parts after the prelude, in the fixed order in which
// their sections run within each phase, and the bit that puts each in (0:
// always).
var admitParts = []struct {
	name string
	opt  partSet
}{
	{"record", withRecord}, {"override", 0}, {"learned", 0}, {"penalty", 0}, {"health", 0}, {"route", withRoute},
	{"search", withSearch}, {"global", 0}, {"ceiling", withCeiling}, {"reserves", withReserves},
	{"wake", withTickets}, {"pushes", withPushes}, {"pool", withPool}, {"leases", withLeases}, {"floor", withFloor},
}

// partsOf returns the parts call c can use: a part whose arguments are
// all empty would act on nothing.
func partsOf(c admitCall) partSet {
	var p partSet
	for _, x := range []struct {
		in  bool
		set partSet
	}{
		{c.CeilingInterval != 0, withCeiling}, {len(c.Reserves) > 0, withReserves}, {len(c.LaterWakes) > 0, withPushes},
		{c.Adaptive != "", withSearch}, {len(c.Senders) > 0, withPool}, {c.MaxInFlight > 0, withLeases},
		{c.Token != "", withRecord}, {c.Tickets != ticketNone, withTickets}, {c.RecoveryFloor > 0, withFloor},
		{keys.RouteSkipped(c.Skip), withRoute}, // a prefix's skip: the call can fail over
	} {
		if x.in {
			p |= x.set
		}
	}
	return p
}

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
	b.WriteString("-- The reply's layout and reason codes (compose.go's tables): reply(")
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

// composeAdmit returns the admission script of the parts in set.
func composeAdmit(set partSet) string {
	return composeParts(func(name string, opt partSet) bool { return opt == 0 || set&opt != 0 })
}

// composeParts returns the admission script of the parts keep keeps.
func composeParts(keep func(name string, opt partSet) bool) string {
	src := parsedParts()
	var parts []luapart.Part
	for i, p := range admitParts {
		if keep(p.name, p.opt) {
			parts = append(parts, luapart.Part{Name: p.name, Sections: src.parts[i]})
		}
	}
	return luapart.Prune(luapart.Compose(src.head, admitPhases, parts))
}

// partSources are the parts read and split into their sections once (the
// reason codes written as numbers), for every variant to compose from.
type partSources struct {
	head  string              // the script's first lines and the prelude
	parts []map[string]string // admitParts' sections, by phase
}

var (
	partsOnce sync.Once
	partsRead partSources
)

// parsedParts returns the parts of partFiles, read once (resetAdmitScripts
// reads them again).
func parsedParts() partSources {
	partsOnce.Do(func() {
		read := func(name string) string {
			b, err := fs.ReadFile(partFiles, name+".lua")
			if err != nil {
				panic(err)
			}
			return reasonCodes(string(b))
		}
		prelude, ends := cutEnds(read("prelude"))
		prelude = replyCalls(prelude)
		for k, v := range ends {
			ends[k] = replyCalls(v)
		}
		if strings.Count(prelude, "\n--@reply\n") != 1 {
			panic("admit/prelude.lua: want one --@reply line")
		}
		partsRead.head = "#!lua\n-- The admission script, composed by admission/compose.go from admit/*.lua.\n" +
			luapart.Shared(strings.Replace(prelude, "--@reply\n", replyLua(), 1))
		partsRead.parts = make([]map[string]string, len(admitParts))
		for i, p := range admitParts {
			src := replyCalls(endCalls("admit/"+p.name+".lua", read(p.name), ends))
			partsRead.parts[i] = luapart.Sections("admit/"+p.name, src, admitPhases)
		}
	})
	return partsRead
}

// fixedKeys is how many KEYS of admitCall come before its lists.
const fixedKeys = 11

// An admitVariant is a composed admission script and its call's layout:
// the parts' source names the KEYS and ARGV of admitCall's full layout;
// the variant is sent only those its parts read, in the same order,
// renumbered, so that an argument no part reads costs nothing.
type admitVariant struct {
	*redis.Script
	src  string
	sent atomic.Bool // run once by this process: Redis has it cached, unless flushed
	keys []int       // the fixed KEYS sent, 1-based in the full layout; the lists follow them
	args []int       // the ARGV sent, 1-based in the full layout
}

// run runs v with keys and args. Its first run in the process sends the
// source (EVAL, which caches it), so that a variant's first call is one
// call too (EVALSHA would be refused and sent again); later runs send the
// SHA, and the source once more if Redis lost it.
func (v *admitVariant) run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if v.sent.CompareAndSwap(false, true) {
		return v.Eval(ctx, rdb, keys, args...)
	}
	return v.Run(ctx, rdb, keys, args...)
}

// send returns the KEYS and ARGV in v's layout of c, a send's call of a
// class whose ARGV New boxed once (classArgv, the full layout's): a value
// perSend names is c's, boxed here, the others are taken boxed (a call
// costs no allocation per value).
func (v *admitVariant) send(c *admitCall, classArgv []any) ([]string, []any) {
	keys := make([]string, len(v.keys), len(v.keys)+c.lists())
	for i, k := range v.keys {
		keys[i] = c.key(k)
	}
	keys = append(append(append(keys, c.Reserves...), c.LaterWakes...), c.Senders...)
	args := make([]any, len(v.args))
	for i, a := range v.args {
		if perSend(a) {
			args[i] = c.arg(a)
		} else {
			args[i] = classArgv[a-1]
		}
	}
	return keys, args
}

const kvMarker = "--@layout\n"

// references returns where src names KEYS[n], ARGV[n] or s[n], each as
// [start, end, name's start, name's end, n's start, n's end]. It scans
// with strings.IndexByte: a variant is composed at its first call.
func references(src string) [][6]int {
	var refs [][6]int
	for from := 0; ; {
		i := strings.IndexByte(src[from:], '[')
		if i < 0 {
			return refs
		}
		i += from
		from = i + 1
		j := from
		for j < len(src) && '0' <= src[j] && src[j] <= '9' {
			j++
		}
		if j == from || j == len(src) || src[j] != ']' {
			continue
		}
		for _, name := range []string{"KEYS", "ARGV", "s"} {
			start := i - len(name)
			if strings.HasSuffix(src[:i], name) && (start == 0 || !luapart.IsNameByte(src[start-1])) {
				refs = append(refs, [6]int{start, j + 1, start, i, from, j})
				break
			}
		}
	}
}

// layout renumbers src's references to the full layout's KEYS, ARGV and
// the MGET's values (s) to those src reads, and returns the variant.
func layout(src string) *admitVariant {
	refs := references(src)
	used := map[string]map[int]bool{"KEYS": {}, "ARGV": {}}
	for _, m := range refs {
		n, _ := strconv.Atoi(src[m[4]:m[5]])
		if name := src[m[2]:m[3]]; name == "ARGV" {
			used["ARGV"][n] = true
		} else if n <= fixedKeys {
			used["KEYS"][n] = true
		}
	}
	v := &admitVariant{keys: slices.Sorted(maps.Keys(used["KEYS"])), args: slices.Sorted(maps.Keys(used["ARGV"]))}
	at := func(list []int, n int) int { return slices.Index(list, n) + 1 }
	var b strings.Builder
	last := 0
	for _, m := range refs {
		name := src[m[2]:m[3]]
		n, _ := strconv.Atoi(src[m[4]:m[5]])
		list := v.keys
		if name == "ARGV" {
			list = v.args
		}
		fmt.Fprintf(&b, "%s%s[%d]", src[last:m[0]], name, at(list, n))
		last = m[1]
	}
	b.WriteString(src[last:])
	src = b.String()
	v.src = strings.Replace(src, kvMarker, fmt.Sprintf("local KV = %d -- the first key of the lists\n", len(v.keys)+1), 1)
	v.Script = redis.NewScript(v.src)
	return v
}

// admitVariants caches the composed scripts by their parts, and admitSHAs
// them by SHA-1 (hex), for ScriptOp.
var (
	admitMu       sync.RWMutex
	admitVariants = map[partSet]*admitVariant{}
	admitSHAs     = map[string]*admitVariant{}
)

// admitScript returns the admission script of the parts in set, composed
// once.
func admitScript(set partSet) *admitVariant {
	admitMu.RLock()
	v := admitVariants[set]
	admitMu.RUnlock()
	if v != nil {
		return v
	}
	v = layout(composeAdmit(set))
	admitMu.Lock()
	defer admitMu.Unlock()
	if old := admitVariants[set]; old != nil {
		return old
	}
	admitVariants[set] = v
	admitSHAs[v.Hash()] = v
	scriptop.Register(OpAdmit, v.src)
	return v
}

// admitBySHA returns the composed admission script whose SHA-1 (hex) is
// sha, if this process composed it.
func admitBySHA(sha string) (*admitVariant, bool) {
	admitMu.RLock()
	defer admitMu.RUnlock()
	v, ok := admitSHAs[sha]
	return v, ok
}

// admitSource returns the source of the composed admission script whose
// SHA-1 (hex) is sha, if this process composed it.
func admitSource(sha string) (string, bool) {
	v, ok := admitBySHA(sha)
	if !ok {
		return "", false
	}
	return v.src, true
}

// resetAdmitScripts forgets the composed scripts: the parts changed
// (mutate_test.go).
func resetAdmitScripts() {
	admitMu.Lock()
	defer admitMu.Unlock()
	admitVariants, admitSHAs = map[partSet]*admitVariant{}, map[string]*admitVariant{}
	partsOnce = sync.Once{}
}

// shaOf returns src's SHA-1 in hex, as EVALSHA takes it.
func shaOf(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
