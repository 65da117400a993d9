package guard

import (
	"context"
	"encoding/json"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// Verification is a message of VERIFICATIONS_TOPIC: an application's
// word that the code of the message id was used.
type Verification struct {
	ID string `json:"id"`
}

// VerificationCounts are what Listen made of the verifications: a known
// id counts in its class (a send in the class's min_conversion window),
// an unknown or old one, ignored, with class "".
type VerificationCounts interface {
	Verification(class string)
}

// Listen receives sub's verifications (VERIFICATIONS_TOPIC's
// subscription) until ctx ends, marking each id's code used. A message
// that is not one ({"id": "..."}) or names an unknown id (asked again
// after verifyAgainAfter) is acked and counted; one Redis could not take
// is nacked, to come back. counts may be nil.
func (g *Guard) Listen(ctx context.Context, sub *pubsub.Subscriber, counts VerificationCounts) error {
	return sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) {
		var v Verification
		if err := json.Unmarshal(m.Data, &v); err != nil || v.ID == "" {
			m.Ack()
			if counts != nil {
				counts.Verification("")
			}
			return
		}
		in, err := g.verifiedIn(ctx, v.ID)
		if err == nil && len(in) == 0 {
			in, err = g.verifiedAgain(ctx, v.ID)
		}
		if err != nil {
			g.opts.Logger.Warn("could not mark a code used; the verification comes back", "err", err)
			m.Nack()
			return
		}
		m.Ack()
		if counts == nil {
			return
		}
		if len(in) == 0 {
			counts.Verification("")
		}
		for _, class := range in {
			counts.Verification(class)
		}
	})
}

// verifyAgainAfter is how long an unknown id waits before it is asked
// again: its send may still be in a counter's hands (Options.Linger and
// a call), and an application that verifies at once comes before it.
const verifyAgainAfter = time.Second

// verifiedAgain is verifiedIn once verifyAgainAfter has passed; an error
// when ctx ends first.
func (g *Guard) verifiedAgain(ctx context.Context, id string) ([]string, error) {
	t := time.NewTimer(verifyAgainAfter)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return g.verifiedIn(ctx, id)
	}
}
