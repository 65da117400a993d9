package providertest

import (
	"bytes"
	"container/heap"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// receiptPoster posts a Simulator's receipts. A scheduler goroutine hands
// each message's next receipt, once due, to one of Workers goroutines,
// which posts it and schedules the message's next one (or a retry): a
// message's receipts go out one after another, in the planned order. The
// goroutines start with the first message that asks for receipts and stop
// with close; ctx ending cancels the posts under way.
type receiptPoster struct {
	dialect dialect                 // read-only
	now     func() time.Time        // the Simulator's clock, for the receipts' timestamps; read-only
	token   *atomic.Pointer[string] // the Simulator's credential: Twilio's signing key

	// Set by start under mu, read-only after.
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	queue  chan *receiptJob // unbuffered: the scheduler waits for a free worker
	wake   chan struct{}    // capacity 1: the heap changed
	wg     sync.WaitGroup   // the scheduler and the workers

	mu sync.Mutex
	// Guarded by mu.
	cfg     ReceiptConfig
	owed    map[string]float64 // take's balance per kind of event
	heap    jobHeap            // jobs waiting for their due time
	live    map[*receiptJob]struct{}
	seq     uint64
	started bool
	closed  bool
	stats   ReceiptStats
	posted  ring[PostedReceipt]
	idle    chan struct{} // closed when Pending falls to 0, then replaced
}

// receiptJob is a message's receipts and how far they are.
type receiptJob struct {
	msg     *sentMessage
	steps   []receiptStep
	i       int // the step to post next
	attempt int // retries of step i so far
	due     time.Time
	seq     uint64 // orders jobs of the same due time
	// The last receipt posted, for a replay; only the goroutine posting
	// the job touches them.
	lastBody   []byte
	lastHeader http.Header
}

func newReceiptPoster(cfg ReceiptConfig, maxKept int, d dialect, token *atomic.Pointer[string]) *receiptPoster {
	return &receiptPoster{
		dialect: d,
		token:   token,
		wake:    make(chan struct{}, 1),
		cfg:     cfg.withDefaults(),
		owed:    make(map[string]float64),
		live:    make(map[*receiptJob]struct{}),
		stats:   ReceiptStats{ByStatus: map[string]int{}, Refused: map[int]int{}},
		posted:  newRing[PostedReceipt](maxKept),
		idle:    make(chan struct{}),
	}
}

// enqueue plans the receipts of m, accepted now.
func (p *receiptPoster) enqueue(m sentMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	steps := p.plan(m, time.Now())
	p.stats.Messages++
	if p.closed || p.stats.Pending >= p.cfg.Queue {
		p.stats.Dropped += len(steps)
		return
	}
	if !p.started {
		p.start()
	}
	j := &receiptJob{msg: &m, steps: steps}
	p.live[j] = struct{}{}
	p.stats.Pending++
	p.push(j, steps[0].due)
}

// start starts the scheduler and the workers. p.mu must be held.
func (p *receiptPoster) start() {
	p.started = true
	p.client = &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: p.cfg.Workers,
		IdleConnTimeout:     30 * time.Second,
	}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.queue = make(chan *receiptJob)
	p.wg.Add(1 + p.cfg.Workers)
	go p.schedule()
	for range p.cfg.Workers {
		go p.work()
	}
}

// push schedules j's next post at due. p.mu must be held.
func (p *receiptPoster) push(j *receiptJob, due time.Time) {
	j.due, j.seq = due, p.seq
	p.seq++
	heap.Push(&p.heap, j)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// schedule hands each job to a worker once it is due, until ctx ends.
func (p *receiptPoster) schedule() {
	defer p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		p.mu.Lock()
		var next *receiptJob
		wait := time.Hour
		if len(p.heap) > 0 {
			if wait = time.Until(p.heap[0].due); wait <= 0 {
				next = heap.Pop(&p.heap).(*receiptJob)
			}
		}
		p.mu.Unlock()
		if next != nil {
			select {
			case p.queue <- next:
				continue
			case <-p.ctx.Done():
				return
			}
		}
		t.Reset(wait)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// work posts the jobs it is handed until ctx ends.
func (p *receiptPoster) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.queue:
			p.post(j)
		}
	}
}

// post posts j's current receipt once and notes the answer.
func (p *receiptPoster) post(j *receiptJob) {
	p.mu.Lock()
	st, cfg := j.steps[j.i], p.cfg
	p.mu.Unlock()
	var body []byte
	var h http.Header
	if st.replay && j.lastBody != nil {
		body, h = j.lastBody, j.lastHeader.Clone()
	} else {
		body, h = p.dialect.receiptBody(receiptRequest{msg: j.msg, step: st, at: p.now(), token: *p.token.Load(), cfg: &cfg})
	}
	j.lastBody, j.lastHeader = body, h.Clone()
	ctx, cancel := context.WithTimeout(p.ctx, cfg.Timeout)
	defer cancel()
	answer := 0
	if req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.msg.callback, bytes.NewReader(body)); err == nil {
		req.Header = h
		if resp, err := p.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRequestBody))
			resp.Body.Close()
			answer = resp.StatusCode
		}
	}
	p.done(j, st, answer)
}

// done notes the answer to j's current receipt and schedules what comes
// next: a retry, the message's next receipt, or nothing.
func (p *receiptPoster) done(j *receiptJob, st receiptStep, answer int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // close counted what was left of j
		return
	}
	p.stats.Attempts++
	ok := answer >= 200 && answer < 300
	if !ok {
		p.stats.Refused[answer]++
		if j.attempt < p.cfg.Retries {
			j.attempt++
			p.stats.Retries++
			p.push(j, time.Now().Add(p.cfg.RetryDelay<<(j.attempt-1)))
			return
		}
		p.stats.Failed++
	} else {
		p.stats.Posted++
		p.stats.ByStatus[st.status]++
	}
	if st.forged {
		p.stats.Forged++
	}
	p.posted.push(PostedReceipt{
		At: time.Now(), ProviderID: st.part, Ref: j.msg.ref, Status: st.status,
		ErrorCode: st.errorCode, Answer: answer, Forged: st.forged,
	})
	j.i, j.attempt = j.i+1, 0
	if j.i < len(j.steps) {
		p.push(j, j.steps[j.i].due)
		return
	}
	delete(p.live, j)
	p.stats.Pending--
	if p.stats.Pending == 0 {
		close(p.idle)
		p.idle = make(chan struct{})
	}
}

// close drops the receipts not yet done, stops the goroutines and waits
// for them.
func (p *receiptPoster) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for j := range p.live {
			p.stats.Dropped += len(j.steps) - j.i
		}
		clear(p.live)
		p.heap = nil
		p.stats.Pending = 0
		close(p.idle)
	}
	started := p.started
	p.mu.Unlock()
	if !started {
		return
	}
	p.cancel()
	p.wg.Wait()
	p.client.CloseIdleConnections()
}

// wait returns once no message's receipts are pending, or ctx has ended.
func (p *receiptPoster) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		pending, idle := p.stats.Pending, p.idle
		p.mu.Unlock()
		if pending == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// jobHeap orders jobs by due time, then by when they were pushed.
type jobHeap []*receiptJob

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h jobHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(*receiptJob)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}
