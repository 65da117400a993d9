// Command loadtest reproduces the incident of docs/design.md and measures the fix:
// the old send limiters (v1 static split, v2 GET-then-INCR, plan A atomic
// INCR; package internal/oldlimiters) and the real one (package admission,
// with the dispatcher's nack policy) each drive K concurrent senders against
// a real Redis and the provider simulator, under every way the provider may
// count its 100 messages per second, side by side in one run.
//
//	go run ./cmd/loadtest                      # the whole matrix, about 4 min
//	go run ./cmd/loadtest --quick              # 2 s runs, K=2,16, two modes
//	go run ./cmd/loadtest --json out.json --svg out.svg
//	go run ./cmd/loadtest --strategies gcra --fault redis-down@2s+1.5s
//	go run ./cmd/loadtest --strategies gcra --arrival-jitter 20ms  # requests held 0-20 ms before the provider
//	go run ./cmd/loadtest --soak 10m --soak-csv soak.csv  # leaks: 23 sender processes
//
// Invariant: every run is bounded and leaves nothing behind. Each run lasts
// --duration, plus at most one send timeout for sends already on the wire;
// every goroutine it starts stops at the run's end and is waited for, and
// its Redis clients, HTTP server and proxy are closed, before the next run
// starts. Each run counts in a key namespace of its own; Redis's own
// figures of a run (INFO commandstats) are the whole server's, reset with
// CONFIG RESETSTAT at the run's start. A redis-server the
// command starts itself is stopped on every way out, error and interrupt
// included.
//
// What one run is: K senders, each standing for a pod, with its own Redis
// client, provider client, clock skew and workers (by default 4 that take
// OTP first and marketing otherwise, and 2 that take OTP only). A marketing
// backlog that never runs dry and an OTP stream at --otp-rate feed all
// senders. The simulator records every request; the report measures them by
// any window, whatever the simulator itself enforced. The start of a run is
// part of it: a campaign starts at whatever phase of the second it starts.
// With --arrival-jitter D each request is held a uniform random time in
// [0, D] in front of the simulator, so that it sees arrivals spread as
// PROVIDER_ARRIVAL_JITTER allows for; gcra's rows also give the time from
// the limiter's admission returning to the request written on the wire.
//
// Soak (--soak DURATION): K (23) sender processes, each this program started
// again with its spec in LOADTEST_SOAK_SENDER, run gcra at full rate on one
// account for DURATION against one provider simulator. Every 10 s the
// harness asks each for its live heap, goroutines and open sockets (a line
// on its stdin, a JSON line back on its stdout) and reads Redis's
// used_memory and DBSIZE (the most of ten reads over the 10 s: the
// messages' send-once records expire 30 s after their send). It fails if any of them (per-process figures by
// their median) grows more than 10 % from minute 2 (halfway in a run
// shorter than 4 min) to the end, or if the provider answered any 429.
// Closing a sender's stdin stops it.
//
// Files: main.go (flags, run), config.go (modes, strategies, faults),
// harness.go (one run), sender.go (workers and the strategies' send loops),
// queue.go (the load), fault.go (fault schedule; Redis going down is
// internal/redistest's Proxy refusing connections), jitter.go (the delaying
// proxy of --arrival-jitter), redisserver.go and
// pdeathsig_*.go (a local redis-server), metrics.go (counters, the Redis command hook, quantiles;
// Redis's own figures come from internal/redisstats),
// report.go (table and JSON), svg.go (the chart), soak.go (the soak's
// harness), soaksender.go (a soak sender process), soakreport.go (the
// soak's criterion, table and CSV).
package main
