package ledger

import (
	"embed"
	"io/fs"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/scriptop"
)

// The ledger's scripts. receipt.lua and story.lua are composed of parts
// (internal/luapart), one file per mechanism with its contract at the top,
// in receipt/ and story/; story.lua finds a story with receipt.lua's
// find.lua. Each runs with EVALSHA, falling back to EVAL on NOSCRIPT.
// receipt.lua declares no flags: on a full Redis (noeviction) it is
// refused whole, the receipt is answered with an error and the provider
// retries it; so is giveback.lua (the resend it gives back is lost, and
// logged). story.lua and delivery.lua (no-writes) only read.
//
//go:embed *.lua receipt/*.lua story/*.lua
var embeddedScripts embed.FS

// scriptFiles holds the scripts' files; the mutation check reads them
// from a copy instead (mutate_test.go).
var scriptFiles fs.FS = embeddedScripts

var (
	// receiptParts are receipt.lua's: the arguments checked, the helpers
	// defined, the published events cleared and the counts written, then
	// the sweep or the fold, each of which replies.
	receiptParts = luapart.Script{Head: "receipt/head", Phases: []string{"check", "define", "write", "sweep", "fold"},
		Parts: []string{"receipt/args", "receipt/find", "receipt/owed", "receipt/counts", "receipt/route", "receipt/sweep", "receipt/fold"}}
	// storyParts are story.lua's: the story found as a receipt finds it.
	storyParts = luapart.Script{Head: "story/head", Phases: []string{"check", "define", "read"}, Parts: []string{"receipt/find", "story/read"}}
)

var (
	receiptLua, receiptScript   = composed(receiptParts)
	storyLua, storyScript       = composed(storyParts)
	givebackLua, givebackScript = file("giveback.lua")
	deliveryLua, deliveryScript = file("delivery.lua")
)

// composed returns the script of p's parts in scriptFiles.
func composed(p luapart.Script) (string, *redis.Script) {
	src := p.Compose(scriptFiles)
	return src, redis.NewScript(src)
}

// file returns the script of scriptFiles' file name.
func file(name string) (string, *redis.Script) {
	b, err := fs.ReadFile(scriptFiles, name)
	if err != nil {
		panic(err)
	}
	return string(b), redis.NewScript(string(b))
}

// Operations, one per script: the names scriptop.Of gives.
const (
	OpReceipt = "receipt" // receipt.lua: a delivery receipt folded, or the owed events swept
	// Not per message: the operator's reads, and a failed publish.
	OpStory    = "story"    // story.lua: `dispatcher message`'s read
	OpDelivery = "delivery" // delivery.lua: the delivery counters `dispatcher status` reads
	OpGiveBack = "giveback" // giveback.lua: a resend whose publish failed, given back for the sweep
)

func init() { registerOps() }

// registerOps registers each script by its operation: scriptop.Of names
// their calls.
func registerOps() {
	for op, src := range map[string]string{OpReceipt: receiptLua, OpStory: storyLua, OpDelivery: deliveryLua, OpGiveBack: givebackLua} {
		scriptop.Register(op, src)
	}
}
