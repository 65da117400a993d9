package localstack

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// miniredisScripts is a go-redis hook for the embedded Redis. miniredis's
// Lua does not read the "#!lua" first line by which Redis 7 takes a
// script's flags (admission/scripts.go): EVAL gives it the script with that
// line left blank, and EVALSHA asks for the script by the SHA-1 of what
// miniredis was given. And miniredis refuses TIME in a read-only script
// (EVAL_RO, EVALSHA_RO) as if it wrote, which Redis allows: those are
// run as EVAL and EVALSHA, the scripts being read-only all the same
// (status.lua, processes.lua: `dispatcher demo --console` reads them).
type miniredisScripts struct{}

// flagless maps the SHA-1 of a script with its "#!lua" line to that of the
// script miniredis was given.
var flagless sync.Map

func (miniredisScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (miniredisScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		withoutFlags(cmd.Args())
		return next(ctx, cmd)
	}
}
func (miniredisScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			withoutFlags(cmd.Args())
		}
		return next(ctx, cmds)
	}
}

// withoutFlags rewrites, in place, the arguments of an EVAL of a script
// with a "#!lua" line and of an EVALSHA of such a script.
func withoutFlags(args []any) {
	if len(args) < 2 {
		return
	}
	name, _ := args[0].(string)
	ref, _ := args[1].(string)
	switch strings.ToLower(name) {
	case "eval_ro", "evalsha_ro":
		args[0] = strings.TrimSuffix(strings.ToLower(name), "_ro")
	}
	switch strings.ToLower(name) {
	case "eval", "eval_ro":
		if _, rest, ok := strings.Cut(ref, "\n"); ok && strings.HasPrefix(ref, "#!") {
			args[1] = "\n" + rest // the same line numbers in errors
			flagless.Store(sha1Hex(ref), sha1Hex(args[1].(string)))
		}
	case "evalsha", "evalsha_ro":
		if sha, ok := flagless.Load(ref); ok {
			args[1] = sha
		}
	}
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
