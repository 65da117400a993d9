// Command loadtest reproduces the incident of docs/design.md and measures
// the fix: the old send limiters and the real one, side by side, against a
// real Redis and the provider simulator (package tools/internal/loadharness
// says what a run is). With --scenario it runs the scenarios' rows instead
// of the matrix. The soak is tools/cmd/soak; the alert rules' recordings
// tools/cmd/alertrecord.
//
//	go -C tools run ./cmd/loadtest                      # the whole matrix, about 4 min
//	go -C tools run ./cmd/loadtest --quick              # 2 s runs, K=2,16, two modes
//	go -C tools run ./cmd/loadtest --json out.json --svg out.svg
//	go -C tools run ./cmd/loadtest --strategies gcra --fault redis-down@2s+1.5s
//	go -C tools run ./cmd/loadtest --strategies gcra --arrival-jitter 20ms  # requests held 0-20 ms before the provider
//	go -C tools run ./cmd/loadtest --scenario senders   # a pool of 10 senders on an account counting segments, 30 s
//	go -C tools run ./cmd/loadtest --scenario adaptive  # the learned rate against a provider allowing 60/s, 5 min; fails below its criterion
//	go -C tools run ./cmd/loadtest --scenario adaptive --duration 20s --adaptive-step 1.5s  # the same search, faster
//	go -C tools run ./cmd/loadtest --scenario failover  # the real dispatcher, 3 processes, the OTP account failing 15 s: before/after × 503/hang, about 3 min
//	go -C tools run ./cmd/loadtest --scenario failover --code after --storm hang --send-timeout 1s
//	go -C tools run ./cmd/loadtest --scenario receipts  # 3 dispatchers with their receipts servers, 500 receipts/s for 60 s after the sends
//	go -C tools run ./cmd/loadtest --scenario receipts --duration 10s --receipt-rate 200
//	go -C tools run ./cmd/loadtest --scenario classes   # 3 dispatchers, otp, transactional and marketing lanes on one account: before/after, about 2.5 min
//	go -C tools run ./cmd/loadtest --scenario classes --code after --duration 20s
//	go -C tools run ./cmd/loadtest --scenario senders --pool 10000  # a pool of 10,000 senders
//	go -C tools run ./cmd/loadtest --scenario accounts --accounts 1,10,50  # a dispatcher process per size: memory, goroutines, connections, heartbeats, status
//	go -C tools run ./cmd/loadtest --scenario suppressions  # 3 dispatchers, the demo's traffic, 2 % of recipients suppressed: without a list, then with a million imported; about 4 min
//	go -C tools run ./cmd/loadtest --scenario pumping  # 3 dispatchers, two accounts failing over, legitimate OTP and an attack: the guard off, on, against a slow attack; about 4 min
//	go -C tools run ./cmd/loadtest --scenario deferred  # 1,000,000 messages deferred, then released by 3 releasers: before/after at release_spread 0s, after at 10m, about 20 min
//	go -C tools run ./cmd/loadtest --scenario deferred --messages 100000 --release-spread 0s
//
// The table goes to stdout, progress to stderr; the exit status is 1 when a
// run fails (an adaptive, a failover after, the receipts or the classes after row missing its criterion, a deferred message lost or published twice, say), 2 for -h.
package main

import (
	"context"
	"io"
	"os"

	"smsdispatcher/internal/cli"
	"smsdispatcher/tools/internal/loadharness"
)

func main() {
	if spec, ok := os.LookupEnv(loadharness.AccountsProcessEnv); ok { // the accounts scenario's process
		os.Exit(loadharness.AccountsProcess(spec))
	}
	cli.Main("loadtest", run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := loadharness.ParseMatrix(args, stderr)
	if err != nil {
		return err
	}
	return loadharness.Matrix(ctx, cfg, stdout, stderr)
}
