package server

import (
	"maps"
	"sync"

	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/status"
)

// denials counts, by account and class, the deliveries this process
// nacked for want of a send slot (nack.Denied), in memory: its heartbeat
// tells them (status.Denied), so that the console charts the pool's
// denials without a Redis call per message. It is the dispatcher's
// Observer, and tells next (nil: nobody) of every delivery's end.
type denials struct {
	next dispatch.Observer
	mu   sync.Mutex
	n    status.Denied
}

func newDenials(next dispatch.Observer) *denials {
	return &denials{next: next, n: status.Denied{}}
}

// Observe counts ev if it was denied, on the account it names.
func (d *denials) Observe(ev dispatch.Event) {
	if ev.Outcome == nack.Denied {
		d.mu.Lock()
		if d.n[ev.Account] == nil {
			d.n[ev.Account] = map[string]int64{}
		}
		d.n[ev.Account][ev.Class.String()]++
		d.mu.Unlock()
	}
	if d.next != nil {
		d.next.Observe(ev)
	}
}

// counts are the denials so far, a copy a heartbeat may read while more
// are counted.
func (d *denials) counts() status.Denied {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(status.Denied, len(d.n))
	for account, byClass := range d.n {
		out[account] = maps.Clone(byClass)
	}
	return out
}
