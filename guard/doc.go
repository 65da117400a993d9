// Package guard is the pumping guard: what stops a flood of OTPs to
// premium number ranges (SMS pumping) before it is paid for. A class's
// rules (policy.Guard, ACCOUNTS_FILE's keys of the class) are the
// countries its messages may go to, a range's brake (max_per_prefix), a
// range's share of verified codes (min_conversion), the ranges always
// allowed, and the blocks an operator sets; docs/guard.md describes them.
//
// Invariants:
//   - A message that passes costs no Redis call on its way: Blocks reads
//     the countries and the blocks this process holds in memory, and Sent
//     only queues the send; a counter per class (count) takes a queued
//     send, waits Options.Linger for more, and counts them in one call,
//     off the message's path.
//   - The counts cannot ride in a message's admission or finish call:
//     those scripts take one account's keys ({sms:<account>}, one slot),
//     and the guard's are the class's, {sms:guard:<class>}, another slot,
//     so Redis Cluster refuses a script that takes both. The linger is
//     what keeps the counts' calls to a fraction of the sends.
//   - The blocks are one hash per class, {sms:guard:<class>}:blocks
//     (internal/keys), in a slot of its own: the sends of every account
//     count there. A script that sets a block publishes the hash's name
//     on the channel of that name; every process reads the hash again at
//     once on it, and every second regardless (Run), so a block reaches
//     every process within a second even with the push lost.
//   - A block ends at its until, which every reader checks: an ended
//     block in the hash blocks nothing, and the scripts drop it.
//   - Blocks never reads the number into a log, a metric or an event: a
//     blocked message's status event holds its id, and the metrics its
//     country code.
package guard
