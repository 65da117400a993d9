package console

import (
	"crypto/aes"
	"crypto/cipher"
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

// sealer makes the opaque token of a list's row: its key (an opt-out's
// number) sealed with a key the console makes when it starts, so that an
// operator's row action names the entry without the page holding the
// number. A token of an earlier console, or another list's, opens to
// nothing.
type sealer struct{ aead cipher.AEAD }

func newSealer() sealer {
	k := make([]byte, 32)
	rand.Read(k)
	block, _ := aes.NewCipher(k) // a 32-byte key: never an error
	aead, _ := cipher.NewGCM(block)
	return sealer{aead}
}

// seal is list's key as a token.
func (s sealer) seal(list, key string) string {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(key), []byte(list)))
}

// open is the key of list that token seals; false when it seals none.
func (s sealer) open(list, token string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", false
	}
	key, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(list))
	return string(key), err == nil
}
