// Package redisserver starts a throwaway redis-server for the measuring
// commands (tools/cmd/loadtest, tools/cmd/soak, tools/cmd/alertrecord): on a
// free loopback port, without persistence, in a temporary directory.
//
// Invariant: a server Start returns answers PING, and is gone, directory
// and all, once Stop returns; on Linux the kernel also ends it (and every
// child given SetParentDeathSignal) if the process that started it dies,
// even by SIGKILL.
package redisserver
