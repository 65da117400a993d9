package dispatch

import (
	"context"
	"fmt"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// The pumping guard's two questions (Deps.Guard): before a message's
// admission, on every path, whether it may go at all; and again once its
// slot is granted, just before the send, since a block may have come
// while it waited; then each send is counted, as it is handed over.
// Both read the process's memory: a message that passes costs no Redis
// call.

// guardBlocks returns the try of a message the guard refuses, blocked
// with why (its outcome nack.Blocked), or a zero try when it may go. a is
// the account its status event names.
func (d *Dispatcher) guardBlocks(ctx context.Context, class admission.Class, m Message, a *account) try {
	if d.deps.Guard == nil {
		return try{}
	}
	why := d.deps.Guard.Blocks(ctx, class.String(), m.ID, m.To, a.Name)
	if why == "" {
		return try{}
	}
	return try{account: a, outcome: nack.Blocked, blocked: why, err: fmt.Errorf("blocked by the guard: %s", why)}
}

// guardSent counts m's send in its ranges.
func (d *Dispatcher) guardSent(class admission.Class, m Message) {
	if d.deps.Guard != nil {
		d.deps.Guard.Sent(class.String(), m.ID, m.To)
	}
}
