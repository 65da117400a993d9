package nack_test

import (
	"context"
	"fmt"

	"smsdispatcher/nack"
)

// sendError stands in for the provider's *Error.
type sendError struct{ status int }

func (e *sendError) Error() string   { return fmt.Sprintf("status %d", e.status) }
func (e *sendError) Throttled() bool { return e.status == 429 }
func (e *sendError) Permanent() bool { return e.status/100 == 4 && e.status != 429 }

func Example() {
	for _, err := range []error{nil, &sendError{429}, &sendError{400}, context.DeadlineExceeded} {
		o := nack.Classify(err)
		fmt.Println(o, nack.ActionFor(o), nack.RejectReason(o, err))
	}
	// Output:
	// sent ack sent
	// throttled nack status 429
	// rejected dead_letter provider: status 400
	// transient nack context deadline exceeded
}

func ExampleBudget() {
	b := nack.NewBudget(nack.DefaultMaxTokens, nack.DefaultTokenRatio)
	for range 5 {
		b.OnFailure()
	}
	fmt.Println(b.Tokens(), b.Allow())
	b.OnSuccess()
	fmt.Println(b.Tokens(), b.Allow())
	// Output:
	// 5 false
	// 5.1 true
}
