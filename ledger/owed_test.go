package ledger_test

import (
	"context"
	"strconv"
	"testing"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// TestAFullMemoryOfOwedEventsStillClearsNewOnes: the ids whose owed
// events this process returned are remembered up to a bound; ids it never
// publishes (another process's sweep did, their story expired) fill it.
// A new event published here must still leave the owed set: one old id
// makes room, rather than the new one going unremembered and its event
// being published again by every sweep until the record expires.
func TestAFullMemoryOfOwedEventsStillClearsNewOnes(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), testConfig(t))
	ctx := context.Background()
	for i := range ledger.MaxOwedRemembered {
		ledger.RememberOwed(l.Ledger(), "stale-"+strconv.Itoa(i), 1)
	}
	keepStory(t, l, "n", ledger.Story{Class: "otp", ProviderIDs: []string{"pn"}})
	if f := fold(t, l, report("pn", "undelivered", "30003")); !f.Owed {
		t.Fatalf("a failure made final: %+v, want its event owed", f)
	}
	l.Ledger().EventPublished("n")
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("after its event was published: %+v, want none owed", got)
	}
	if n := ledger.OwedRemembered(l.Ledger()); n > ledger.MaxOwedRemembered {
		t.Fatalf("%d ids remembered, want at most %d", n, ledger.MaxOwedRemembered)
	}
}
