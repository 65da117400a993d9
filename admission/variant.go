package admission

// A composed admission script's variants: the KEYS and ARGV each is sent,
// its layout renumbered to what its parts read, and the cache of the
// variants by their parts and their SHA.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/scriptop"
)

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
