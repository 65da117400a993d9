// Package suppress keeps the deployment's suppression list: the numbers
// that said STOP (or that a provider, an operator or an import put on
// it), one list for every account and class, and each process's copy of
// it in memory.
//
// Invariant: the list in Redis ({sms:suppress}:list) changes only through
// change.lua, which in the same call appends the change, numbered, to the
// log every process follows ({sms:suppress}:log); a List loads the whole
// list in pages, then applies the log's changes in their order, and loads
// again whenever a change's number is not the next one (the log was
// trimmed past it, or Redis lost the list). So a change reaches every
// process's List within one read of the log (a blocked XREAD wakes on
// it), and a message whose number is not on the list costs no Redis call:
// the check is a lookup in memory (docs/suppressions.md).
//
// A Store and a List are safe for concurrent use.
package suppress
