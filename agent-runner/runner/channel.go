package runner

// Follow-up input over the run's IPC channel (decision record 42): on the
// kubernetes engine the runner reads the host's input stream
// (ipc.ChannelInput) through its loopback forwarder, which opens each
// connection with the run's token, instead of the IPC directory's input
// files, which a network volume shared across nodes does not signal.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Bounds of the input stream.
const (
	// streamSilence is how long the stream may say nothing (the host
	// writes a line every 30 s) before the runner takes it for dead and
	// opens another.
	streamSilence = 75 * time.Second
	// streamRetryMax is the longest pause before opening the stream again.
	streamRetryMax = 5 * time.Second
	// ackTimeout bounds an acknowledgement.
	ackTimeout = 5 * time.Second
	// maxItemBytes bounds one line of the stream.
	maxItemBytes = 1 << 20
)

// inputStream keeps the host's input stream open, again after each drop,
// and queues what it sends for the run's loop, which takes it (take) and
// acknowledges each item it took (ack). An item the host sends again (a
// new stream sends everything not acknowledged) and the loop took already
// is acknowledged again and not given to claude twice: the loop keeps the
// names it took.
type inputStream struct {
	base   string
	client *http.Client
	log    zerolog.Logger
	poke   func() // wakes the loop

	mu     sync.Mutex
	queue  []ipc.ChannelItem
	queued map[string]bool
}

func newInputStream(base string, log zerolog.Logger, poke func()) *inputStream {
	return &inputStream{base: base, client: &http.Client{}, log: log.With().Str("part", "input-stream").Logger(), poke: poke, queued: map[string]bool{}}
}

// run keeps the stream open until ctx ends.
func (s *inputStream) run(ctx context.Context) {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		got, err := s.read(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			pause = 100 * time.Millisecond
		}
		s.log.Info().Err(err).Msg("input stream ended; opening it again")
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, streamRetryMax)
	}
}

// read reads one stream until it ends; got says whether it was opened.
func (s *inputStream) read(ctx context.Context) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+ipc.ChannelInput, nil)
	if err != nil {
		return false, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("the host answered %s", resp.Status)
	}
	// A stream silent past streamSilence is cut and opened again.
	watchdog := time.AfterFunc(streamSilence, cancel)
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxItemBytes)
	for sc.Scan() {
		watchdog.Reset(streamSilence)
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue // the host's heartbeat
		}
		var it ipc.ChannelItem
		if err := json.Unmarshal(line, &it); err != nil || it.Name == "" {
			s.log.Warn().Err(err).Msg("input stream: a line that is not an input, skipped")
			continue
		}
		s.add(it)
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	return true, fmt.Errorf("the host ended the stream")
}

// add queues it, once, and wakes the loop.
func (s *inputStream) add(it ipc.ChannelItem) {
	s.mu.Lock()
	if !s.queued[it.Name] {
		s.queued[it.Name] = true
		s.queue = append(s.queue, it)
	}
	s.mu.Unlock()
	s.poke()
}

// take returns what is queued, in order, and empties the queue.
func (s *inputStream) take() []ipc.ChannelItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	for _, it := range q {
		delete(s.queued, it.Name)
	}
	return q
}

// putBack puts items the loop could not deliver yet at the queue's head.
func (s *inputStream) putBack(items []ipc.ChannelItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rest []ipc.ChannelItem
	for _, it := range items {
		s.queued[it.Name] = true
		rest = append(rest, it)
	}
	for _, it := range s.queue {
		if !slices.ContainsFunc(items, func(x ipc.ChannelItem) bool { return x.Name == it.Name }) {
			rest = append(rest, it)
		}
	}
	s.queue = rest
}

// ack tells the host the loop took the input name, which the host then
// forgets. A failed acknowledgement is logged: the host sends the input
// again and the loop, which took it, acknowledges it again.
func (s *inputStream) ack(name string) {
	body, _ := json.Marshal(ipc.ChannelItem{Name: name})
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+ipc.ChannelAck, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			err = fmt.Errorf("the host answered %s", resp.Status)
		}
	}
	if err != nil {
		s.log.Warn().Err(err).Str("input", name).Msg("input not acknowledged; the host sends it again")
	}
}

// scanChannel feeds claude the input the stream queued, in order, as
// scanFiles does the input files: the close makes the run close, a
// message is sent unless the input is closed already (then it stays with
// the host for the next container), and what was delivered is
// acknowledged.
func (r *run) scanChannel() {
	items := r.stream.take()
	for i, it := range items {
		if it.Name == ipc.CloseName {
			if !r.closing {
				r.log.Info().Msg("host asked to close")
			}
			r.closing = true
			r.stream.ack(it.Name)
			continue
		}
		if r.taken[it.Name] {
			r.stream.ack(it.Name) // sent again by a new stream
			continue
		}
		if r.inputClosed {
			continue // stays with the host: the next container takes it
		}
		if err := (ipc.Input{Type: ipc.InputMessage, Text: it.Text}).Validate(); err != nil {
			r.log.Warn().Err(err).Str("input", it.Name).Msg("malformed input; dropped")
			r.stream.ack(it.Name)
			continue
		}
		if err := r.send(it.Text); err != nil {
			// claude is gone; the input is fed to the next process.
			r.log.Warn().Err(err).Str("input", it.Name).Msg("follow-up not delivered yet")
			r.stream.putBack(items[i:])
			return
		}
		r.taken[it.Name] = true
		r.stream.ack(it.Name)
		r.log.Debug().Str("input", it.Name).Msg("follow-up delivered")
	}
}
