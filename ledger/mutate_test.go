package ledger

import (
	"os"
)

// Under the mutation check (tools/cmd/mutate), a mutant of the ledger's
// scripts alone runs this package's tests with SMS_MUTATE_SCRIPTS naming
// a directory of the scripts and their parts, one of them mutated: the
// scripts are read from there, so that every such mutant runs one test
// binary instead of building its own.
func init() {
	dir := os.Getenv("SMS_MUTATE_SCRIPTS")
	if dir == "" {
		return
	}
	scriptFiles = os.DirFS(dir)
	receiptLua, receiptScript = composed(receiptParts)
	storyLua, storyScript = composed(storyParts)
	givebackLua, givebackScript = file("giveback.lua")
	deliveryLua, deliveryScript = file("delivery.lua")
	registerOps()
}
