// Package redisconn makes the Redis clients the dispatcher's limiters
// share, from the settings an operator gives (URL, CA, certificate
// check), and watches the server's eviction policy.
//
// Invariant: nothing it returns or logs holds the URL, which may hold a
// password (errors and warnings name hosts at most); a cluster client
// follows a failover within the call timeout; a client of a rediss://
// server checks its certificate unless told not to, which is warned of.
// PolicyWatch reports, at every check, a maxmemory-policy that may drop
// the limiter's keys.
package redisconn
