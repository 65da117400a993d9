// Package loadharness is the measuring harness behind tools/cmd/loadtest and
// tools/cmd/soak: it reproduces the incident of docs/design.md and measures
// the fix. The old send limiters (v1 static split, v2 GET-then-INCR, plan A
// atomic INCR; package tools/internal/oldlimiters) and the real one (package
// admission, with the dispatcher's nack policy) each drive K concurrent
// senders against a real Redis and the provider simulator, under every way
// the provider may count its 100 messages per second, side by side in one
// run.
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
// The two commands share this package because they share everything but
// their loop: the command line's sender, provider and gcra flags (one
// Config, read by ParseMatrix or ParseSoak, each defining only the flags
// its program reads), the provider modes, the senders and their strategies,
// the load and the counters. The matrix and the scenario rows are one
// program (tools/cmd/loadtest): the same in-process harness and flags, rows of
// different settings. The soak is another (tools/cmd/soak): its senders are
// processes, the command started again with SoakSenderEnv set.
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
// Soak (tools/cmd/soak --soak DURATION): K (23) sender processes, each the program started
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
// Scenarios (tools/cmd/loadtest --scenario senders,adaptive,failover,receipts,classes,accounts,backlog,deferred): rows instead of the matrix, each
// with a provider set up for one feature of the limiter, gcra only, K (3)
// senders as above, OTP at 2/s; --duration, --senders, --otp-rate,
// --target-rps, --marketing-rps and --burst change a scenario's defaults.
// Each scenario prints a table of its own.
//
// senders: one account whose provider counts segments, 25 in any sliding
// second, and a pool of 10 senders of 3 segments in any sliding second
// each (the simulator's SenderLimit); bodies of 1 to 3 segments (fixed by
// the message's id), rates in segments, MAX_SEGMENTS 3, BURST 1, and
// TARGET_RPS = MARKETING_RPS = 21.5 with the limiter's ArrivalJitter at
// 20 ms (--provider-arrival-jitter, the dispatcher's default
// PROVIDER_ARRIVAL_JITTER): the most the dispatcher's start-up rule,
// TARGET_RPS × (1 s + J) + BURST + MAX_SEGMENTS - 1 ≤ 25, allows, so at
// most 0.86 of the account. Each message goes from the sender its
// admission took (Decision.Sender). The row gives the segments accepted
// per second and their share of 25, the simulator's throttles for the
// account and for a sender, the most segments in any sliding second, the
// account's and the busiest sender's (providertest.MaxInWindow), and how many
// senders carried traffic, with the least and the most one carried.
//
// adaptive: a provider allowing 60 messages in any sliding second
// (Retry-After 1 s; more than 300 429s in 10 minutes suspend the account)
// under TARGET_RPS = MARKETING_RPS = 90, BURST 5, with the learned rate on
// (MinRPS 10, ProbeInterval 10 min, Step 10 s or --adaptive-step); every
// 429 is reported to the limiter, as the dispatcher does. The row gives
// the 429s (in all, the most in 10 minutes, in the last 2 minutes, the
// time of the last), the messages accepted per second over the last 2
// minutes and their share of 60, and the learned rate: at the end
// (Limiter.Learned, and each sender's LearnedRPS), every 5 s, and each
// change (read every 250 ms). Its criterion: at most 10 429s in all, none
// in the last 2 minutes (the last half of a run shorter than 4 minutes),
// and at least 0.9 × 60 a second over them; the command fails when a row
// misses it. A Step shorter than the time a rate just above the
// provider's limit takes to draw its 429 (about the provider's window, 1 s
// here) proves rates the provider refuses: 1.5 s is about the shortest
// that searches as the default does.
//
// failover: the real dispatcher, not the harness's senders. Three
// dispatch.Dispatcher processes (as serve wires them, each with its own
// Redis and Pub/Sub clients and limiters) on pstest (internal/localstack),
// Redis and two simulators of 100/s: account primary (OTP and marketing,
// TARGET_RPS 90, MARKETING_RPS 70) and account backup (OTP only). OTP is
// published at 10/s for the whole run, after a marketing backlog of 1.3×
// what MARKETING_RPS sends in it. After a 10 s warm-up the primary fails
// for --storm-length (15 s): 503 to every request (--storm 503), or no
// answer at all, each send waiting out SEND_TIMEOUT (--send-timeout, 1.5 s;
// --storm hang); then it recovers and the run goes on 12 s. Rows: each of
// --code before (the account health rule switched off, failures and
// timeouts in a row never adding up: no failover on errors) and after
// (admission.HealthRule's defaults) with each storm. Each row is measured
// from the simulators' arrivals, a log of every request that reached the
// primary, the OTPs' publish times and the messages' ends (the
// dispatchers' Observer, Pub/Sub's acks): the storm's OTPs' publish→first
// acceptance p50 and p99 and the share accepted before the storm's end,
// marketing on the backup, requests to the primary per second during the
// storm over before it, failback (the primary's first OTP after the storm,
// from its end), and messages lost (acked, yet neither accepted,
// dead-lettered nor expired). An after row that misses p99 ≤ 2 s, ≥ 95 %
// during the storm, no marketing on the backup, ratio ≤ 1.2, failback ≤
// 5 s or nothing lost fails the command.
//
// receipts: the delivery receipts of messages the real dispatcher sent.
// Three processes, each a dispatch.Dispatcher (Config.Receipts) and a
// receipts.Server (Run, on a listener of its own) sharing its limiters and
// adapters, behind one public URL (a balancer that hands the requests to
// the three in turn and times each one), on pstest, Redis and three
// simulators: generic (+1), Twilio (+44) and Vonage (+81, sig HMAC-SHA256),
// marketing only. A backlog sized for --receipt-rate (500/s) over
// --duration (60 s) is sent first; the simulators hold every receipt until
// the sends' planned end (the backlog at 200/s), so that once the
// dispatchers stop and Redis's statistics are reset (CONFIG RESETSTAT)
// Redis counts the receipts' commands alone. Each
// message gets two intermediate receipts and a final one (90 % delivered),
// 10 % a duplicated final, 5 % a replayed one (byte for byte), 20 % the
// final first, and 2 % of receipts are forged (a wrong key), each refused
// one posted again up to 3 times. The row: p50/p99 handling time (request
// to answer), Redis script calls and commands per verified receipt (INFO
// commandstats), final states lost (a genuine final receipt was taken, yet
// the message's state in Redis is not that final, or no status event says
// it and none is owed), forged receipts accepted. Lost, forged accepted,
// a genuine receipt refused for good or more than 1.05 calls a receipt
// fail the command.
//
// classes: the classes (lanes) of the real dispatcher on one account.
// Three processes (dispatch.New with Deps.Lanes), pstest, Redis and the
// strict simulator (100 in any sliding second); the account at TARGET_RPS
// 90, BURST 5. A marketing backlog of 20,000 is published first, then
// transactional messages at 10/s and OTPs at --otp-rate (5/s) for
// --duration (60 s). The after row configures otp, transactional
// (class_rps 30) and marketing (class_rps 70) with reserve_rps otp 20; the
// before row is today's two classes, the transactional messages published
// to the marketing topic behind the backlog. Per class: rate, p50/p99
// publish→acceptance, most in any second, unsent at the end; per row: 429
// answers, Redis script calls and commands per send (INFO commandstats).
// An after row with a 429, transactional p99 above 500 ms, OTP p99 above
// 50 ms or marketing more than 3 % off 60/s (90 − 20 − 10) fails the
// command.
//
// backlog: the OTP lane behind a long campaign, on the classes' stack
// with today's two classes: the account at TARGET_RPS 90, MARKETING_RPS
// 70, the learned rate on, a simulator allowing 60 in any sliding second
// (Retry-After 1 s); a backlog of 20,000, then OTPs at --otp-rate (2/s)
// for --duration (5 min). The before row's Pub/Sub clients ping every
// pull stream, as the client does, which stalls pstest every 30 s (and
// for good once a lane stops reading: its dispatchers are left behind
// after 20 s); the after row's are topology.NewClient's. Per row: OTP
// p50/p99/max publish→acceptance, the same clear of a 429's Retry-After
// and of the ramp-up, the slowest OTPs with their wait split into pull
// and slot, 429s and marketing's rate. An after row with an OTP unsent or
// a clear p99 above 50 ms fails the command.
//
// accounts: what a process pays for its number of accounts. For each size
// of --accounts (1,10,50) one dispatcher process, the command started
// again with AccountsProcessEnv set (server.New and Run as serve wires
// them, on pstest, the Redis and the simulator), each account a generic
// one serving a destination prefix of its own, OTP at 20/s over them for
// --duration (10 s): its VmRSS, goroutines and Redis connections at the
// end, its heartbeat calls and every script call not for a message a
// second over the second half (a go-redis hook), and status.Read's time
// over every account. More than 1 heartbeat or 2 such calls a second
// (with what the window may catch of one more: accountsLimit), or memory
// or connections at the largest size past twice the smallest's, fail the
// command.
//
// suppressions: the suppression list on the demo's traffic. Three
// processes as serve wires them (ACCOUNTS_FILE, server.New and Run: the
// list is the server's, loaded before the lanes pull) on pstest, Redis
// and the strict simulator; one account (TARGET_RPS 90, marketing 70,
// BURST 5); a campaign of 3,000, then OTP at --otp-rate (5/s) while it
// runs; every 50th recipient a number of the list. Two rows side by side:
// the list empty, then --list-size (1,000,000) numbers imported as
// `dispatcher suppressions import` does (Store.Import; the mirror to
// SUPPRESSIONS_TOPIC left out: pstest would keep a million messages).
// Per row: messages to listed numbers sent and suppressed, OTP p50/p99
// publish→sent, Redis script calls and commands per sent message (INFO
// commandstats, reset once every process loaded the list) and admission
// calls; the list row adds the import's time and the memory per number
// in Redis (used_memory across the import, MEMORY USAGE of the hash) and
// in a process (the heap of a List's Load). A listed number sent or not
// suppressed, a message without an end, or more than 2.05 script calls a
// sent message fail the command.
//
// pumping: the pumping guard against an attack. Three processes as serve
// wires them; account main (OTP, marketing) and backup (OTP), each its
// simulator, main answering 503 for 8 s from 8 s in so that OTPs fail
// over; legitimate OTP at --otp-rate (5/s) to 1,000 ranges, 4 in 5
// verified ({"id"} on VERIFICATIONS_TOPIC 0.5 s after the send); an
// attack to random numbers of two ranges, none verified. Rows
// (--guard-rows): off (no guard, the attack at --attack-rate, 40/s, for
// --duration, 30 s), on (docs/guard.md's example: max_per_prefix digits
// 6, count 300 per 10m; min_conversion ratio 0.2, min_sends 50 per 30m,
// digits 5, grace 60s; the same traffic), slow (the same guard with
// min_conversion's grace --guard-grace, 2 s, and an attack at
// --slow-attack-rate, 1/s, to two other ranges until 10 s after both
// are blocked, at most 3 min: a slow attack is the conversion rule's, and with the
// 60 s grace an attack of r a second a range sends min_sends + 60r
// before its block). Per attack range: its sends (requests to either
// simulator, whatever the answer: what the guard counts), those on the
// backup, its OTPs blocked, when its block was first read and by which
// rule with the sends it counted; the legitimate OTPs' sends, blocks and
// p50/p99 publish→sent; the attack's sends and blocks every 5 s; Redis
// script calls and commands per sent message, with the admission's and
// the guard's counter's calls. A row with the guard fails the command
// when a legitimate OTP is blocked, an attack range is not blocked by
// its row's rule, or it got more than count + 5 sends (on) or
// min_sends + 5 or more (slow).
//
// deferred: a campaign deferred to a window's opening and released, at
// scale. --messages (1,000,000) messages are stored through
// deferral.Store.Judge as a dispatcher stores them before acking their
// delivery (24 calls at once over 3 clients), Redis's used_memory read
// before and after; then the window opens and 3 releasers, each with its
// own Redis and Pub/Sub clients, release them to the class's topic on
// pstest, which counts every publish by id (a Publish reactor) before
// keeping it. Rows: --release-spread (0s and the default release_spread)
// × --code: after (deferral.Releaser, a page removed per call), before
// (the release as it was, a remove call per message; at 0s only). Per
// row: the data's size, the stores' time, Redis bytes per message, the
// release's time (to the last id's first publish, and to the store
// empty), the most publishes in a second, each releaser's share, Redis
// script calls and commands per message during the release, lost, twice
// and left. A message lost, published twice or elsewhere, or left stored
// fails the command.
//
// Files: run.go (Matrix, Soak), config.go (flags, modes, strategies, faults),
// harness.go (one run), sender.go (workers and the strategies' send loops),
// queue.go (the load), fault.go (fault schedule; Redis going down is
// internal/redistest's Proxy refusing connections), jitter.go (the delaying
// proxy of --arrival-jitter), metrics.go (counters, the Redis command hook, quantiles;
// Redis's own figures come from internal/redisstats),
// report.go (table and JSON), svg.go (the chart), soak.go (the soak's
// harness), soaksender.go (a soak sender process), soakreport.go (the
// soak's criterion, table and CSV), scenario.go (the scenarios' settings
// and harness), scenarioreport.go (their figures, criterion and tables),
// failover.go (the failover scenario's processes, load and storm),
// failoverreport.go (its rows, criterion and table), receipts.go (the
// receipts scenario and its phases), receiptsprocess.go (its processes),
// receiptstraffic.go (its
// backlog, balancer and logs), receiptsreport.go (its row, criterion and
// table), classes.go (the classes scenario: its processes and traffic),
// classesreport.go (its rows, criterion and table), accounts.go (the
// accounts scenario and its process), accountsreport.go (its criterion and
// table), deferred.go (the deferred scenario: its stores and releasers),
// deferredreport.go (its tally, criterion and table).
//
// The suppressions and pumping scenarios: servestack.go (the dispatcher
// as serve wires it, in several processes, and the messages' ends),
// suppressions.go (the list's import and the rows' traffic),
// suppressionsreport.go (its rows, criterion and table), pumping.go (the
// rows, the traffic and the blocks read), pumpingreport.go (its rows,
// criterion and table).
package loadharness
