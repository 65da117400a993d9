package deadletter

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Action is what Replay did with a dead letter it selected.
type Action int

const (
	// Replayed means republished to its class's topic, then acked.
	Replayed Action = iota
	// Skipped means left listed or, for SkipSent, acked without a
	// republish.
	Skipped
	// Failed means a step failed: the dead letter is left listed.
	Failed
)

func (a Action) String() string {
	return [...]string{"replayed", "skipped", "failed"}[a]
}

// Reason says why Replay skipped a dead letter: the words of its summary.
type Reason string

// Why Replay leaves a dead letter where it is (or, for SkipSent, acks it
// without republishing).
const (
	SkipFiltered      Reason = "filtered"       // not selected by the Filter
	SkipMalformed     Reason = "malformed"      // reject_reason invalid: …, without Force
	SkipTruncated     Reason = "truncated"      // data cut to 64 KiB: the original is gone
	SkipMaxReplays    Reason = "max_replays"    // replayed MaxReplays times already
	SkipNoClass       Reason = "no_class"       // no class attribute: no topic to go to
	SkipUnknownClass  Reason = "unknown_class"  // a class none of ReplayOptions.Topics: no topic to go to
	SkipSent          Reason = "sent"           // its id was sent: acked, never sent twice
	SkipHeld          Reason = "held"           // its id is being sent right now
	SkipUnknownRecord Reason = "unknown_record" // its id's record says something Replay does not know
	SkipNoID          Reason = "no_id"          // no id the dispatcher could have recorded: a replay could not be checked
	SkipExpired       Reason = "record_expired" // older than the send-once records: it may have been sent since
	SkipNew           Reason = "new"            // dead-lettered after the replay started: the cause may not be fixed
	SkipSuppressed    Reason = "suppressed"     // its number is on the suppression list: never sent again
)

// Result is what Replay did with one dead letter it selected.
type Result struct {
	ID     string // the message's id, "" when unknown
	Class  string // otp, marketing, "" when unknown
	Action Action
	Reason Reason // why, when Skipped
	Detail string // what was done, or found, in words
	DryRun bool   // nothing changed: Replayed and Skipped say what would be done
}

// String is the result's line: what was done ("would replay", "would
// skip" in a dry run), the class, the id, and why.
func (r Result) String() string {
	what := r.What()
	detail := r.Detail
	if r.Action == Skipped {
		detail = string(r.Reason) + ": " + detail
	}
	return fmt.Sprintf("%-12s %-9s %s: %s", what, dash(r.Class), printable(dash(r.ID)), printable(detail))
}

// What is what was done: the Action, or in a dry run what would be done
// ("would replay", "would skip").
func (r Result) What() string {
	if r.DryRun && r.Action != Failed {
		return map[Action]string{Replayed: "would replay", Skipped: "would skip"}[r.Action]
	}
	return r.Action.String()
}

// Summary counts what one Replay did.
type Summary struct {
	Replayed, Failed int
	Skipped          map[Reason]int // by reason, those not selected (SkipFiltered) included
	DryRun           bool
	Limited          bool // reading stopped at Inspect.Limit: there may be more
}

// String is the summary's line.
func (s Summary) String() string {
	skipped := 0
	var why []string
	for _, k := range slices.Sorted(maps.Keys(s.Skipped)) {
		skipped += s.Skipped[k]
		why = append(why, fmt.Sprintf("%s %d", k, s.Skipped[k]))
	}
	line := fmt.Sprintf("replayed %d, skipped %d", s.Replayed, skipped)
	if s.DryRun {
		line = fmt.Sprintf("dry run, nothing changed: would replay %d, would skip %d", s.Replayed, skipped)
	}
	if len(why) > 0 {
		line += " (" + strings.Join(why, ", ") + ")"
	}
	return line + fmt.Sprintf(", failed %d", s.Failed)
}
