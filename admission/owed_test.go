package admission

import (
	"context"
	"strconv"
	"testing"

	"smsdispatcher/internal/redistest"
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
	l.mu.Lock()
	for i := range maxOwedRemembered {
		l.owedSeen["stale-"+strconv.Itoa(i)] = []int64{1}
	}
	l.mu.Unlock()
	keepStory(t, l, "n", Story{Class: "otp", ProviderIDs: []string{"pn"}})
	if f := fold(t, l, report("pn", "undelivered", "30003")); !f.Owed {
		t.Fatalf("a failure made final: %+v, want its event owed", f)
	}
	l.EventPublished("n")
	if err := l.FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("after its event was published: %+v, want none owed", got)
	}
	if n := len(l.owedSeen); n > maxOwedRemembered {
		t.Fatalf("%d ids remembered, want at most %d", n, maxOwedRemembered)
	}
}
