package loadharness

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(SoakSenderEnv); ok { // a soak test started this binary as a sender
		os.Exit(SoakSender(spec))
	}
	if spec, ok := os.LookupEnv(AccountsProcessEnv); ok { // the accounts scenario started this binary as its process
		os.Exit(AccountsProcess(spec))
	}
	// The Pub/Sub client's dependency starts a goroutine of its own at init
	// (the failover scenario's); a Receive's shutdown stops its keep-alive
	// asynchronously (the receipts scenario's dispatchers).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"))
}
