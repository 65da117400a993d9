package scriptop

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
)

// TestOfNamesARegisteredScriptHoweverItIsCalled: EVALSHA and EVAL, and
// their read-only forms, of a registered script are named its operation;
// any other command, or a script nobody registered, is Other.
func TestOfNamesARegisteredScriptHoweverItIsCalled(t *testing.T) {
	const src = "return 'scriptop test'"
	Register("test-op", src)
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	for _, tt := range []struct {
		args []any
		want string
	}{
		{[]any{"evalsha", sha, "0"}, "test-op"},
		{[]any{"EVALSHA_RO", sha, "0"}, "test-op"},
		{[]any{"eval", src, "0"}, "test-op"},
		{[]any{"eval_ro", src, "0"}, "test-op"},
		{[]any{"eval", "return 'unregistered'", "0"}, Other},
		{[]any{"get", sha}, Other},
		{[]any{"ping"}, Other},
	} {
		if got := Of(tt.args); got != tt.want {
			t.Errorf("Of(%v) = %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := Hash("test-op"); got != sha {
		t.Errorf("Hash = %q, want %q", got, sha)
	}
	if got := Hash("no-such-op"); got != "" {
		t.Errorf("Hash of an unregistered op = %q, want none", got)
	}
}
