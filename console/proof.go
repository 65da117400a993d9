package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// dryRunValid is how long a dry run's list may be replayed: past it, the
// letters may have changed enough that the operator should look again.
const dryRunValid = time.Hour

// proofKey signs the lists of ids a dry run shows, so that a replay
// replays only a list this console's dry run made for the same user. The
// key lives as long as the handler: a console restarted, or another
// replica, refuses an older list, and the operator dry-runs again.
type proofKey []byte

func newProofKey() proofKey {
	k := make([]byte, 32)
	rand.Read(k) // never fails (crypto/rand)
	return k
}

// sign is the proof that user's dry run at unix second at listed ids.
func (k proofKey) sign(user string, at int64, ids []string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(user + "\n" + strconv.FormatInt(at, 10) + "\n" + strings.Join(ids, "\n")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether proof is sign's of user, at and ids, and at is
// within dryRunValid before now.
func (k proofKey) valid(proof, user string, at int64, ids []string, now time.Time) bool {
	t := time.Unix(at, 0)
	if t.After(now.Add(time.Minute)) || now.Sub(t) > dryRunValid {
		return false
	}
	return hmac.Equal([]byte(proof), []byte(k.sign(user, at, ids)))
}
