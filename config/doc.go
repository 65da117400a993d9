// Package config loads the dispatcher's settings: the process's (Process)
// from flags and the environment, and the provider accounts' (Account)
// from the single-account variables or from ACCOUNTS_FILE.
//
// Invariant: every setting is one row of one table, which knows its
// variable, its flag, its key in ACCOUNTS_FILE (if an account may set it),
// its default and how it parses; an account is checked by one path
// whatever its source, and a value that cannot work is an *Error naming
// the variable it came from, or the file and the account's key. Settings
// and accounts returned without an error have passed every check the
// limiter and the adapters make at start.
package config
