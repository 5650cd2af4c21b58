package main

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// turnRecorder writes every end of a turn the turns hub hears to the store
// (turn_ends), in order, off the hub's path (the hub must not block): `bridged
// why` tells a message's attempts from them after the hub forgot them or
// the daemon stopped.
type turnRecorder struct {
	db   *store.DB
	log  zerolog.Logger
	mu   sync.Mutex
	shut bool
	ch   chan turns.End
	done chan struct{}
}

// turnRecordQueue is how many ends may wait to be written; one more is
// logged and not recorded.
const turnRecordQueue = 256

func startTurnRecorder(db *store.DB, log zerolog.Logger) *turnRecorder {
	r := &turnRecorder{db: db, log: log, ch: make(chan turns.End, turnRecordQueue), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for e := range r.ch {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := db.Turns.Add(ctx, store.TurnEnd{Chat: store.ChatID(e.Chat), Upto: store.MessageID(e.Upto), Result: string(e.Result),
				Reason: e.Reason, Attempt: e.Attempt, Attempts: e.Attempts, At: e.At})
			cancel()
			if err != nil {
				log.Warn().Err(err).Str("chat", e.Chat).Msg("cannot record how a turn ended")
			}
		}
	}()
	return r
}

// add queues e to be written; it does not block.
func (r *turnRecorder) add(e turns.End) {
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

// stop writes the ends queued and returns.
func (r *turnRecorder) stop() {
	r.mu.Lock()
	if !r.shut {
		r.shut = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}
