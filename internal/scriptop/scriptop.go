// Package scriptop names a Redis command by the Lua script it runs, so
// that the Redis-calls figures say which operation costs what.
//
// Invariant: a script is named by its SHA-1, as EVALSHA sends it (EVAL's
// source is hashed the same way); every package that runs scripts
// registers each of them, once, under its operation's name (Register),
// and Of then names its calls whichever package made them. A command of
// no registered script is Other.
package scriptop

import (
	"crypto/sha1"
	"encoding/hex"
	"sync"
)

// Other is the name of a command that runs no registered script.
const Other = "other"

var (
	mu  sync.RWMutex
	ops = map[string]string{} // SHA-1 (hex) -> operation
)

// Register names the script src op.
func Register(op, src string) {
	mu.Lock()
	defer mu.Unlock()
	ops[hash(src)] = op
}

func hash(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// Of names the operation of a Redis command, from its arguments as
// go-redis gives them: EVALSHA or EVAL (or their _RO forms) of a
// registered script is its operation; anything else is Other.
func Of(args []any) string {
	if len(args) < 2 {
		return Other
	}
	name, _ := args[0].(string)
	ref, _ := args[1].(string)
	switch name {
	case "evalsha", "EVALSHA", "evalsha_ro", "EVALSHA_RO":
	case "eval", "EVAL", "eval_ro", "EVAL_RO":
		ref = hash(ref)
	default:
		return Other
	}
	mu.RLock()
	defer mu.RUnlock()
	if op, ok := ops[ref]; ok {
		return op
	}
	return Other
}

// Hash returns the SHA-1 (hex) of a script registered as op, or "" for
// none.
func Hash(op string) string {
	mu.RLock()
	defer mu.RUnlock()
	for sha, o := range ops {
		if o == op {
			return sha
		}
	}
	return ""
}
