package providertest

// ring is a FIFO of at most max values; pushing onto a full ring drops the
// oldest. The backing slice grows on demand, so a large max costs nothing
// until it is used. A ring is not safe for concurrent use; its owner guards
// it.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest value
	n    int // values held
	max  int // zero or negative: the ring holds nothing
}

func newRing[T any](max int) ring[T] { return ring[T]{max: max} }

func (r *ring[T]) len() int { return r.n }

// front returns the oldest value. The ring must not be empty.
func (r *ring[T]) front() T { return r.buf[r.head] }

// popFront drops the oldest value. The ring must not be empty.
func (r *ring[T]) popFront() {
	var zero T
	r.buf[r.head] = zero // let the GC have what it pointed to
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// push appends v and reports whether the oldest value was dropped (or v
// itself, when max is not positive) to make room.
func (r *ring[T]) push(v T) (dropped bool) {
	if r.max <= 0 {
		return true
	}
	if r.n == r.max { // then len(r.buf) == r.max
		r.buf[r.head] = v
		r.head = (r.head + 1) % len(r.buf)
		return true
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
	return false
}

func (r *ring[T]) grow() {
	nb := make([]T, min(r.max, max(16, 2*len(r.buf))))
	r.appendValues(nb[:0]) // fits: len(nb) > r.n
	r.buf, r.head = nb, 0
}

// appendValues appends the values, oldest first, to dst.
func (r *ring[T]) appendValues(dst []T) []T {
	for i := 0; i < r.n; i++ {
		dst = append(dst, r.buf[(r.head+i)%len(r.buf)])
	}
	return dst
}

// reset empties the ring, keeping its memory.
func (r *ring[T]) reset() {
	clear(r.buf)
	r.head, r.n = 0, 0
}
