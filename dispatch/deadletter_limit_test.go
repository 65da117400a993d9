package dispatch

import (
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// TestDataAtThePublishLimitIsDeadLetteredOnce: data as large as the topic
// takes (pstest: gRPC's 4 MiB; Pub/Sub: 10 MB) still fits its dead letter.
func TestDataAtThePublishLimitIsDeadLetteredOnce(t *testing.T) {
	h := newHarness(t, strict, nil)
	id := h.publishRaw(admission.Marketing, []byte(`{"to":"+819012345678","body":"hi","pad":"`+strings.Repeat("a", 4194264-60)+`"}`))
	h.start(1, Config{})
	ev := h.waitEnded([]string{id}, 150*time.Second)[id]
	if ev.Outcome != nack.Invalid || ev.Action != nack.DeadLetter || len(h.eventsOf(id)) != 1 {
		t.Fatalf("%v/%v in %d deliveries, want dead-lettered once", ev.Outcome, ev.Action, len(h.eventsOf(id)))
	}
}
