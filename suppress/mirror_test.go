package suppress

import (
	"context"
	"sync"
	"testing"
	"time"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// mirrorLog is a Mirror that keeps what it was told.
type mirrorLog struct {
	mu  sync.Mutex
	got []Entry
}

var _ Mirror = (*mirrorLog)(nil)

func (m *mirrorLog) Mirror(_ context.Context, e Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, e)
}

// TestEveryRequestedChangeIsMirrored: the mirror is told of every change
// asked for, whether or not the list changed (a request retried after its
// publish failed finds the list changed already): an add of a number on
// the list tells it the first entry again, a remove of one not on it the
// removal, and an import run again every entry, with the first entry of
// each number already on the list.
func TestEveryRequestedChangeIsMirrored(t *testing.T) {
	rdb := redistest.Client(t)
	names := keys.Suppressions("{sms:suppress:" + redistest.UniqueAccount(t) + "}")
	t.Cleanup(func() { rdb.Del(context.Background(), names.List(), names.Log(), names.Seq()) })
	log := &mirrorLog{}
	store := NewStore(rdb, names, log)
	ctx := context.Background()
	const n, m = "+447700900123", "+447700900124"
	t0, t1 := time.UnixMilli(1_790_000_000_000).UTC(), time.UnixMilli(1_790_000_060_000).UTC()
	first := Entry{Number: n, Action: ActionAdd, Source: SourceInbound, Account: "a", Reason: "replied STOP", At: t0}
	steps := []struct {
		do   func() (bool, error)
		want Entry
	}{
		{func() (bool, error) { return store.Add(ctx, first) }, first},
		{func() (bool, error) {
			return store.Add(ctx, Entry{Number: n, Source: SourceOperator, Reason: "again", At: t1})
		}, first},
		{func() (bool, error) { return store.Remove(ctx, Entry{Number: n, Source: SourceOperator, At: t1}) },
			Entry{Number: n, Action: ActionRemove, Source: SourceOperator, At: t1}},
		{func() (bool, error) { return store.Remove(ctx, Entry{Number: n, Source: SourceOperator, At: t1}) },
			Entry{Number: n, Action: ActionRemove, Source: SourceOperator, At: t1}},
	}
	for i, s := range steps {
		if _, err := s.do(); err != nil {
			t.Fatal(err)
		}
		if len(log.got) != i+1 || log.got[i] != s.want {
			t.Fatalf("step %d: the mirror was told %+v; want %+v last", i, log.got, s.want)
		}
	}
	log.got = nil
	imported := []Entry{{Number: m, Source: SourceImport, At: t0}}
	for range 2 {
		if _, err := store.Import(ctx, append([]Entry(nil), imported...)); err != nil {
			t.Fatal(err)
		}
	}
	want := Entry{Number: m, Action: ActionAdd, Source: SourceImport, At: t0}
	if len(log.got) != 2 || log.got[0] != want || log.got[1] != want {
		t.Fatalf("two imports told the mirror %+v; want %+v twice", log.got, want)
	}
}
