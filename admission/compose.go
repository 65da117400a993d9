package admission

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
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
type partSet uint8

// The optional parts; every other part is in every script.
const (
	withCeiling  partSet = 1 << iota // ceiling.lua: the class has a ceiling
	withReserves                     // reserves.lua: the class is held to an earlier class's reserve
	withSearch                       // search.lua: the account learns its rate
	withPool                         // pool.lua: the account has a sender pool
	withLeases                       // leases.lua: MaxInFlight
	allParts     = withCeiling | withReserves | withSearch | withPool | withLeases
)

// admitParts are the parts after the prelude, in the fixed order in which
// their sections run within each phase, and the bit that puts each in (0:
// always).
var admitParts = []struct {
	name string
	opt  partSet
}{
	{"record", 0}, {"override", 0}, {"learned", 0}, {"penalty", 0}, {"health", 0}, {"route", 0},
	{"search", withSearch}, {"global", 0}, {"ceiling", withCeiling}, {"reserves", withReserves},
	{"wake", 0}, {"pool", withPool}, {"leases", withLeases}, {"floor", 0},
}

// partsOf returns the parts a call of c's shape can use: a part whose
// arguments are all empty would act on nothing.
func partsOf(c admitCall) partSet {
	var p partSet
	if c.CeilingInterval != 0 {
		p |= withCeiling
	}
	if len(c.Reserves) > 0 {
		p |= withReserves
	}
	if c.Adaptive != "" {
		p |= withSearch
	}
	if len(c.Senders) > 0 {
		p |= withPool
	}
	if c.MaxInFlight > 0 {
		p |= withLeases
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
	replyHealth: {"health", false},
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

// replyLua returns the Lua of the reason codes' table and of reply(),
// which the prelude's "--@reply" line stands for.
func replyLua() string {
	var b strings.Builder
	b.WriteString("-- The reply's reason codes and layout (compose.go's tables).\nlocal R = {")
	for code, r := range admitReasons {
		if code > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %d", r.lua, code)
	}
	var params, fields []string
	for _, f := range admitReply {
		if f.param {
			params = append(params, f.lua)
		}
		fields = append(fields, f.lua)
	}
	fmt.Fprintf(&b, "}\nlocal function reply(%s)\n  return {%s}\nend\n", strings.Join(params, ", "), strings.Join(fields, ", "))
	return b.String()
}

var sectionLine = regexp.MustCompile(`(?m)^-- @(\w+)\n`)

// sections splits a part's source into its sections by phase; what comes
// before the first is its contract.
func sections(name, src string) map[string]string {
	marks := sectionLine.FindAllStringSubmatchIndex(src, -1)
	out := map[string]string{}
	for i, m := range marks {
		phase := src[m[2]:m[3]]
		end := len(src)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		if _, dup := out[phase]; dup || !knownPhase(phase) {
			panic(fmt.Sprintf("admit/%s.lua: section %q unknown or twice", name, phase))
		}
		out[phase] = strings.TrimRight(src[m[1]:end], "\n") + "\n"
	}
	return out
}

func knownPhase(p string) bool {
	for _, q := range admitPhases {
		if q == p {
			return true
		}
	}
	return false
}

// composeAdmit returns the admission script of the parts in set.
func composeAdmit(set partSet) string {
	read := func(name string) string {
		b, err := fs.ReadFile(partFiles, name+".lua")
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	prelude := read("prelude")
	if strings.Count(prelude, "\n--@reply\n") != 1 {
		panic("admit/prelude.lua: want one --@reply line")
	}
	var b strings.Builder
	b.WriteString("#!lua\n-- The admission script, composed by admission/compose.go from admit/*.lua.\n")
	b.WriteString(strings.Replace(prelude, "--@reply\n", replyLua(), 1))
	parts := make([]map[string]string, len(admitParts))
	for i, p := range admitParts {
		parts[i] = sections(p.name, read(p.name))
	}
	for _, phase := range admitPhases {
		for i, p := range admitParts {
			if sec, ok := parts[i][phase]; ok && (p.opt == 0 || set&p.opt != 0) {
				fmt.Fprintf(&b, "\n-- %s.lua: %s\n%s", p.name, phase, sec)
			}
		}
	}
	return b.String()
}

// admitScripts caches the composed scripts by their parts, and admitSHAs
// their sources by SHA-1 (hex), for ScriptOp.
var (
	admitMu      sync.RWMutex
	admitScripts = map[partSet]*redis.Script{}
	admitSHAs    = map[string]string{}
)

// admitScript returns the admission script of the parts in set, composed
// once.
func admitScript(set partSet) *redis.Script {
	admitMu.RLock()
	sc := admitScripts[set]
	admitMu.RUnlock()
	if sc != nil {
		return sc
	}
	src := composeAdmit(set)
	admitMu.Lock()
	defer admitMu.Unlock()
	if sc := admitScripts[set]; sc != nil {
		return sc
	}
	sc = redis.NewScript(src)
	admitScripts[set] = sc
	admitSHAs[sc.Hash()] = src
	return sc
}

// admitSource returns the source of the composed admission script whose
// SHA-1 (hex) is sha, if this process composed it.
func admitSource(sha string) (string, bool) {
	admitMu.RLock()
	defer admitMu.RUnlock()
	src, ok := admitSHAs[sha]
	return src, ok
}

// resetAdmitScripts forgets the composed scripts: the parts changed
// (mutate_test.go).
func resetAdmitScripts() {
	admitMu.Lock()
	defer admitMu.Unlock()
	admitScripts, admitSHAs = map[partSet]*redis.Script{}, map[string]string{}
}

// shaOf returns src's SHA-1 in hex, as EVALSHA takes it.
func shaOf(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
