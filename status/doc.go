// Package status is what each account's processes tell Redis of
// themselves and what `dispatcher status` reads back: the heartbeats'
// writer and the report's reader, in one place.
//
// Invariant: the report only reads. Read reads each account's state in
// Redis in one read-only call (status.lua, run with EVALSHA_RO) and the
// process registry in another (processes.lua), and builds the report from
// them and the configured settings; nothing it does changes a key. The
// registry's keys ({sms:processes}, in a hash slot of their own) are the
// only ones this package writes: a heartbeat (heartbeat.lua) once a
// second per process, through the limiters' circuit, whatever its number
// of accounts. The exported report types are the `status --json`
// contract documented in docs/observing.md ("Status"): fields are added,
// never renamed. A process's state in the registry is "<host> <version>
// <account>=<mode> ... <account>/<class>=<denied> ...", written by
// Heartbeats and parsed by Read: its denials (Denied) are counted in the
// process's memory and told with its beat, never a call of their own.
//
// Files: report.go (the report and its reading), account.go (an
// account's state as status.lua reads it), registry.go (the registry: a
// beat and its read), heartbeat.go (the heartbeats), scripts.go (the
// scripts and their operation names), text.go (the text form and
// --watch), delivery.go and message.go (the delivery figures and a
// message's story, as admission reads them).
package status
