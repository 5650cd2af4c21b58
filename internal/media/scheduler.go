package media

import (
	"context"
	"sync"

	"github.com/bridged-app/bridged/internal/store"
)

// scheduler hands queued media to at most n workers, one chat to one worker
// at a time, chats in the order their first media arrived; a chat's media
// go in message order.
type scheduler struct {
	mu     sync.Mutex
	queued map[store.ChatID][]store.Media
	busy   map[store.ChatID]bool
	known  map[store.MessageID]bool // queued or in flight
	ready  []store.ChatID           // chats with queued media and no worker
	kick   chan struct{}
}

func newScheduler() *scheduler {
	return &scheduler{
		queued: make(map[store.ChatID][]store.Media),
		busy:   make(map[store.ChatID]bool),
		known:  make(map[store.MessageID]bool),
		kick:   make(chan struct{}, 1),
	}
}

// Queue holds the media waiting to be fetched. It is built before the
// Pool that fetches them (Deps.Queue), so that what stores the messages
// can take it at construction while the Pool takes the channels that
// fetch. Add never blocks; nothing is fetched until the Pool runs.
type Queue struct{ s *scheduler }

// NewQueue returns an empty queue.
func NewQueue() *Queue { return &Queue{s: newScheduler()} }

// Add queues m, whose message is committed, unless it is queued or in
// flight already. It never blocks.
func (q *Queue) Add(m store.Media) { q.s.add(m) }

// add queues m unless it is queued or in flight already.
func (s *scheduler) add(m store.Media) {
	s.mu.Lock()
	if !s.known[m.MessageID] {
		s.known[m.MessageID] = true
		if len(s.queued[m.Chat]) == 0 && !s.busy[m.Chat] {
			s.ready = append(s.ready, m.Chat)
		}
		s.queued[m.Chat] = append(s.queued[m.Chat], m)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// next takes the next media a free worker may fetch.
func (s *scheduler) next() (store.Media, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 {
		return store.Media{}, false
	}
	chat := s.ready[0]
	s.ready = s.ready[1:]
	q := s.queued[chat]
	m := q[0]
	if len(q) == 1 {
		delete(s.queued, chat)
	} else {
		s.queued[chat] = q[1:]
	}
	s.busy[chat] = true
	return m, true
}

// done frees m's chat for its next media.
func (s *scheduler) done(m store.Media) {
	s.mu.Lock()
	delete(s.known, m.MessageID)
	delete(s.busy, m.Chat)
	if len(s.queued[m.Chat]) > 0 {
		s.ready = append(s.ready, m.Chat)
	}
	s.mu.Unlock()
}

// run calls work for queued media on at most n goroutines until ctx ends,
// then waits for those in flight.
func (s *scheduler) run(ctx context.Context, n int, work func(store.Media)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	finished := make(chan store.Media)
	free := n
	for {
		for free > 0 && ctx.Err() == nil {
			m, ok := s.next()
			if !ok {
				break
			}
			free--
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(m)
				finished <- m
			}()
		}
		select {
		case <-s.kick:
		case m := <-finished:
			s.done(m)
			free++
		case <-ctx.Done():
			for ; free < n; free++ {
				<-finished
			}
			return
		}
	}
}
