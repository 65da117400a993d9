// Package alertrecord records the fault runs whose /metrics the alert
// rules' unit tests replay (k8s/monitoring/testdata/recordings). Each run
// builds the dispatcher from the product's source (`go build
// smsdispatcher/cmd/dispatcher`, in the tools module, whose replace names
// the product's directory: it needs the Go toolchain and the source) and
// starts real `dispatcher serve` processes against
// the local stack (package localstack: pstest and the provider simulator),
// a real Redis (through a proxy that a fault can cut), feeds them a
// marketing campaign above its cap and a stream of OTP, injects its fault
// (or has recipients reply STOP to the pods' inbound webhook, signed by
// the simulator), and scrapes every process's /metrics once a second, as Prometheus would
// with a 1 s interval. A run with receipts also scrapes a receipt driver
// (pod="receipts") that counts, for each send the simulator accepted, the
// receipts the pods' receipts server would count (receiptDriver). What it
// writes, one file per run (DIR/<run>.txt):
//
//	# header lines: the run, its fault and its timeline
//	<series> <value at 0s> <value at 1s> ...
//
// one line per series of the families the rules read, labels as scraped
// plus pod="a"/"b" (the target label Prometheus adds; otel_scope_* dropped),
// values in the rule tests' own notation ("_" where a scrape lacked the
// series, "a+bxN" for N steps of b, "axN" for N repeats). The converter in
// k8s/monitoring (alerttests) turns a recording into a test's input_series.
//
// Invariant: every run is bounded by its length and leaves nothing behind:
// its dispatcher processes are interrupted and waited for, its servers,
// proxy and own redis-server stopped, before the next run starts; each run
// sends on an account named after it, so runs share no Redis key.
package alertrecord
