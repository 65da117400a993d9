// Package redistest gives tests the real Redis servers that .ci/run starts,
// and a fault-injecting TCP proxy that can make one "go down".
//
// Invariant: a test that needs Redis either gets a live server or fails with
// a message saying how to start one; it never skips.
package redistest
