package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// ErrEmptySecret reports a secret file that holds nothing but white space.
var ErrEmptySecret = errors.New("the file is empty")

// Secret is a credential the process can replace while it runs: one given
// as it is never changes; one read from a file (a mounted Kubernetes
// Secret) is read again by Reload, so that a fixed credential takes effect
// without a restart. Value is safe to call concurrently with Reload.
// Neither String nor an error of this type shows the value.
type Secret struct {
	path    string
	v       atomic.Pointer[string]
	version atomic.Uint64 // changes of v

	mu sync.Mutex // serializes Reload
}

// StaticSecret returns a Secret that is always v.
func StaticSecret(v string) *Secret {
	s := new(Secret)
	s.v.Store(&v)
	return s
}

// FileSecret reads path now and returns a Secret that Reload reads again.
// One trailing newline (LF or CRLF) is trimmed. An unreadable file, or one
// that holds only white space, is an error that never shows the content.
func FileSecret(path string) (*Secret, error) {
	s := &Secret{path: path}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Value returns the credential as last read.
func (s *Secret) Value() string { return *s.v.Load() }

// Version counts the changes Reload has seen: a failure of a send made
// with an older version says nothing of the credential in force now.
func (s *Secret) Version() uint64 { return s.version.Load() }

// String never shows the value.
func (s *Secret) String() string { return "[secret]" }

// Reload reads the file again and reports whether the value changed. A
// static Secret never changes. On an error (unreadable, empty) the value
// read before is kept.
func (s *Secret) Reload() (changed bool, err error) {
	if s.path == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := readSecretFile(s.path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is known to the caller; the error stays short
		}
		return false, fmt.Errorf("read %s: %w", s.path, err)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(bytes.TrimSpace(b)) == 0 {
		return false, ErrEmptySecret
	}
	v := string(b)
	old := s.v.Swap(&v)
	if old != nil && *old == v {
		return false, nil
	}
	if old != nil {
		s.version.Add(1)
	}
	return true, nil
}

// maxSecretFile bounds what is read of a credential file, so that a path
// to a log or /dev/zero neither hangs nor bloats the process.
const maxSecretFile = 64 << 10

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err == nil && len(b) > maxSecretFile {
		err = fmt.Errorf("larger than %d bytes", maxSecretFile)
	}
	return b, err
}
