package admission

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
)

// A classState is what a Limiter keeps of one of its classes: its admission call,
// the turn its waiters queue for, and the levels it is held to.
type classState struct {
	name    Class
	policy  policy.Class  // its rules (ClassLimit.Policy)
	pos     int           // its place in Config.Classes: 0 is served first
	admit   admitCall     // its admission script's call, as New builds it
	argv    []any         // admit's ARGV, boxed once (admitVariant.send)
	turn    chan int      // one waiter of the class talks to Redis; see Admit
	queued  atomic.Int32  // callers of Admit waiting for the turn
	costs   map[int]int   // how many of them wait with each cost; guarded by Limiter.mu
	spacing time.Duration // the longest interval of its levels: its tickets' spacing
	later   time.Duration // the longest spacing of the classes after it (their lookahead per unit)
	levels  []int         // its levels in the fallback's cells (fallback.levels)
	nextAsk time.Time     // the wake ticket the last admission brought back; guarded by Limiter.mu
}

// A level is one GCRA state the classes share in Redis besides the global
// one: a class's ceiling, or what the classes after an earlier class take
// together (that class's reserve). rps is its rate; members are the
// positions of the classes held to it, in priority order.
type level struct {
	key     string
	rps     float64
	members []int
}

// levels returns the levels of cfg's classes (after defaults): ceiling[i]
// is class i's ceiling level (-1: none, its ceiling is TargetRPS), and
// reserves[i] the reserve levels it is held to. A reserve that can never
// bind (the classes after it cannot together reach its rate, or an
// earlier reserve is as tight) is left out; one held by a single class is
// that class's ceiling, so that the default classes have today's two keys
// and no more.
func classLevels(cfg Config, key keys.Account) (all []level, ceiling []int, reserves [][]int) {
	n := len(cfg.Classes)
	ceilingRPS := make([]float64, n)
	for i, k := range cfg.Classes {
		ceilingRPS[i] = k.RPS
	}
	reserves = make([][]int, n)
	tightest := cfg.TargetRPS // the tightest reserve so far
	for i, e := range cfg.Classes[:n-1] {
		room := cfg.TargetRPS - e.Reserve
		if e.Reserve <= 0 || room >= tightest {
			continue
		}
		tightest = room
		if i == n-2 {
			// One class after it: the reserve is that class's ceiling.
			ceilingRPS[n-1] = min(ceilingRPS[n-1], room)
			continue
		}
		sum := 0.0
		for _, k := range cfg.Classes[i+1:] {
			sum += k.RPS
		}
		if room >= sum {
			continue // the classes after it can never take more
		}
		lv := level{key: key.AfterTAT(string(e.Name)), rps: room}
		for j := i + 1; j < n; j++ {
			lv.members = append(lv.members, j)
			reserves[j] = append(reserves[j], len(all))
		}
		all = append(all, lv)
	}
	ceiling = make([]int, n)
	for i, k := range cfg.Classes {
		ceiling[i] = -1
		// The override's second rate lowers a ceiling: the class it is
		// about has one even at the account's rate.
		if ceilingRPS[i] < cfg.TargetRPS || overridden(cfg, i) {
			ceiling[i] = len(all)
			all = append(all, level{key: key.ClassTAT(string(k.Name)), rps: ceilingRPS[i], members: []int{i}})
		}
	}
	return all, ceiling, reserves
}

// overridden reports whether the operator's override's second rate
// (Limiter.Override) lowers the ceiling of cfg's class i: the last class,
// unless it is the only one and its policy spares it (an account of OTP
// alone, which the override's first rate alone lowers).
func overridden(cfg Config, i int) bool {
	return i == len(cfg.Classes)-1 && (i > 0 || !cfg.Classes[i].Policy.OverrideSparesAlone)
}

// newClasses builds each class's admission call from base (the account's
// keys and global level) and its fallback levels.
func newClasses(cfg Config, key keys.Account, base admitCall) (map[Class]*classState, []Class) {
	all, ceiling, reserves := classLevels(cfg, key)
	gi := interval(cfg.TargetRPS)
	burst := time.Duration(cfg.Burst - 1)
	byName := make(map[Class]*classState, len(cfg.Classes))
	order := make([]Class, len(cfg.Classes))
	list := make([]*classState, len(cfg.Classes))
	for i, k := range cfg.Classes {
		c := &classState{name: k.Name, policy: k.Policy, pos: i, admit: base, turn: make(chan int, 1), spacing: gi, costs: map[int]int{}}
		a := &c.admit
		a.Wake = key.Wake(string(k.Name))
		a.CeilingTAT = key.ClassTAT(string(k.Name))
		// A class after the first may not use one interval of the global
		// tolerance for each class before it (none when BURST is 1): an
		// earlier class finds a slot at once after its burst.
		a.Reserve = (min(burst, time.Duration(i)) * gi).Microseconds()
		if j := ceiling[i]; j >= 0 {
			iv := interval(all[j].rps)
			// The ceiling tolerates one send more even at BURST 1: a send
			// pushed back by an earlier class's slot catches up, instead
			// of every send after it wasting the gap between the two
			// levels' intervals (at 97/92, 4 % of the account). The global
			// level alone keeps the contract.
			a.CeilingInterval, a.CeilingTau = iv.Microseconds(), (max(burst, 1) * iv).Microseconds()
			a.OverrideCeiling = overridden(cfg, i)
			c.spacing = max(c.spacing, iv)
			c.levels = append(c.levels, j)
		}
		var triples []string
		for _, j := range reserves[i] {
			lv := all[j]
			iv := interval(lv.rps)
			tau := max(burst, 1) * iv
			// Held to the same reserve, each class after the first of its
			// members leaves one interval more of the tolerance to them.
			rank := time.Duration(i - lv.members[0])
			triples = append(triples, fmt.Sprintf("%d %d %d", iv.Microseconds(), tau.Microseconds(), (min(rank, max(burst, 1))*iv).Microseconds()))
			a.Reserves = append(a.Reserves, lv.key)
			c.spacing = max(c.spacing, iv)
			c.levels = append(c.levels, j)
		}
		a.ReserveLevels = strings.Join(triples, " ")
		// The later classes: a slot it takes of the global level (all) or
		// of one of its reserves (the push) is one their next wake ticket
		// would point at.
		var pushes []string
		for j := i + 1; j < len(cfg.Classes); j++ {
			var push time.Duration
			for _, r := range reserves[i] {
				if slices.Contains(reserves[j], r) {
					push = max(push, interval(all[r].rps))
				}
			}
			a.LaterWakes = append(a.LaterWakes, key.Wake(string(cfg.Classes[j].Name)))
			pushes = append(pushes, strconv.FormatInt(push.Microseconds(), 10))
		}
		a.WakePushes = strings.Join(pushes, " ")
		a.Spacing = c.spacing.Microseconds()
		c.argv = a.argv()
		byName[k.Name], order[i], list[i] = c, k.Name, c
	}
	for i := len(list) - 2; i >= 0; i-- {
		list[i].later = max(list[i+1].later, list[i+1].spacing)
	}
	return byName, order
}

// levelRates returns the rate of each level of cfg's classes, in the
// order of classLevels, for the fallback.
func levelRates(cfg Config) []float64 {
	all, _, _ := classLevels(cfg, "")
	r := make([]float64, len(all))
	for i, lv := range all {
		r[i] = lv.rps
	}
	return r
}

// classOf returns the state of the class named name, or an error if the
// account has no such class.
func (l *Limiter) classOf(name Class) (*classState, error) {
	if c, ok := l.classes[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("admission: account %s has no class %q (its classes: %s)", l.cfg.Account, name, l.classNames())
}

func (l *Limiter) classNames() string {
	s := make([]string, len(l.order))
	for i, c := range l.order {
		s[i] = strconv.Quote(string(c))
	}
	return strings.Join(s, ", ")
}

// Classes returns the account's classes in priority order.
func (l *Limiter) Classes() []Class { return append([]Class(nil), l.order...) }

// classStrings returns the classes' names in priority order.
func (l *Limiter) classStrings() []string {
	s := make([]string, len(l.order))
	for i, c := range l.order {
		s[i] = string(c)
	}
	return s
}

// middleWakes are the wake-ticket keys of the classes between the first
// and the last, which the override drops with theirs.
func (l *Limiter) middleWakes() []string {
	var wakes []string
	for _, c := range l.order[min(1, len(l.order)):max(len(l.order)-1, 1)] {
		wakes = append(wakes, l.classes[c].admit.Wake)
	}
	return wakes
}
