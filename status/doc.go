// Package status is what each account's processes tell Redis of
// themselves and what `dispatcher status` reads back: the heartbeats'
// writer and the report's reader, in one place.
//
// Invariant: the report only reads. Read asks each account's limiter for
// its state in Redis (admission.Limiter.Status) and builds the report from
// it and the configured settings; nothing it does changes a key. The
// exported report types are the `status --json` contract documented in
// docs/observing.md ("Status"): fields are added, never renamed. A
// heartbeat's state is "<mode> <host> <version>", written by Heartbeats and
// parsed by Read.
//
// Files: report.go (the report and its reading), text.go (the text form
// and --watch), heartbeat.go (the heartbeats).
package status
