// Package server runs one dispatcher process: a limiter per account on one
// Redis circuit, the dispatch.Dispatcher pulling both subscriptions, the
// dead-letter publisher, the heartbeats, the gauges' state and the HTTP
// endpoints (/healthz, /readyz with its reasons, /metrics).
//
// Invariant: Serve stops in one order. /readyz fails and the receipts'
// listener (RECEIPTS_ADDR) stops taking receipts at once, then publishes
// the status events it still owes (within the stop bound); the dispatcher
// stops pulling, nacks what waits and lets sends finish; the receipts'
// listener is waited for; the dead-letter and status publishers flush;
// the HTTP server stops; then the pull watch stops. A receipts' listener
// that fails stops the process the same way. A Pub/Sub that does not answer can hold the pulls and the flush:
// each is waited for a bounded time (Options.StopBound), and Serve returns
// whatever Pub/Sub does. The clients a Server is given are the caller's to
// close, after Serve or Run and Close have returned.
//
// Files: server.go (the process's parts and Run), serve.go (Serve and its
// shutdown order), receipts.go (the receipts' listener beside the
// dispatcher), http.go (the HTTP server and its endpoints),
// telemetry.go (the traces and metrics it is given), denials.go (the
// denials the heartbeats tell).
package server
