package deferral

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The Pub/Sub client's package starts opencensus's worker at init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
