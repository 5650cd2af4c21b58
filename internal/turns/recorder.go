package turns

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// recordQueue is how many ends may wait to be written; one more is logged
// and not recorded.
const recordQueue = 256

// recordTimeout bounds the write of one end.
const recordTimeout = 30 * time.Second

// Recorder writes the ends a Hub hears (its onEnd: Add) with write, in
// order, on a goroutine of its own, off the Hub's path (the Hub must not
// block): the daemon keeps them in its store, so `bridged why` tells a
// message's attempts from them after the Hub forgot them or the daemon
// stopped. Make it with NewRecorder; Stop writes what is queued and ends
// the goroutine.
type Recorder struct {
	log  zerolog.Logger
	mu   sync.Mutex
	shut bool
	ch   chan End
	done chan struct{}
}

// NewRecorder starts a Recorder that writes each end with write, under a
// context of its own bounded to 30 s; a failed write is logged.
func NewRecorder(write func(context.Context, End) error, log zerolog.Logger) *Recorder {
	r := &Recorder{log: log, ch: make(chan End, recordQueue), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for e := range r.ch {
			ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			err := write(ctx, e)
			cancel()
			if err != nil {
				log.Warn().Err(err).Str("chat", e.Chat).Msg("cannot record how a turn ended")
			}
		}
	}()
	return r
}

// Add queues e to be written; it does not block. After Stop it does
// nothing.
func (r *Recorder) Add(e End) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return
	}
	select {
	case r.ch <- e:
	default:
		r.log.Warn().Str("chat", e.Chat).Msg("turn end not recorded: too many waiting to be written")
	}
}

// Stop writes the ends queued and returns.
func (r *Recorder) Stop() {
	r.mu.Lock()
	if !r.shut {
		r.shut = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}
