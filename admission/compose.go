package admission

import (
	"embed"
	"io/fs"
	"strings"
	"sync"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/luapart"
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
