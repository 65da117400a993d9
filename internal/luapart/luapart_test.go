package luapart

import (
	"strings"
	"testing"
)

// TestPruneLeavesOutTheHelpersNothingCalls: a helper no code names is left
// out with its comment, and so is one only a pruned helper called; a
// helper named only in a comment goes too, and one named is kept.
func TestPruneLeavesOutTheHelpersNothingCalls(t *testing.T) {
	src := `local x = 1
-- used is called.
local function used(v)
  return v
end
-- unused is never called.
local function unused(v)
  return inner(v)
end
local function inner(v)
  return v
end

local function only()
end
return used(x) -- a comment names only(), which nothing calls
`
	got := Prune(src)
	for _, gone := range []string{"unused", "inner", "local function only", "-- unused is never called."} {
		if strings.Contains(got, gone) {
			t.Errorf("Prune kept %q:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"-- used is called.\nlocal function used(v)\n  return v\nend\n", "return used(x) -- a comment"} {
		if !strings.Contains(got, kept) {
			t.Errorf("Prune dropped %q:\n%s", kept, got)
		}
	}
}
