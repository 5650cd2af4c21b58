// Package channeltest holds a fake channel for tests of the packages that
// send through channels or report on them. It is imported by tests only.
package channeltest

import (
	"context"
	"strings"
	"sync"

	"github.com/bridged-app/bridged/internal/channel"
)

// queued is how many sends and typing changes Sends and Typings hold for a
// test to read; beyond it they are only recorded.
const queued = 100

// Typing is one SetTyping call.
type Typing struct {
	Chat string
	On   bool
}

// SentID is the network id Fake.Send returns for a message with id id.
func SentID(id string) string { return "sent-" + id }

// Fake is a channel that owns the chats "<name>:…", reports the status the
// test sets (connected at first), and records every send attempt and
// typing change. Its methods are safe for concurrent use.
type Fake struct {
	name    string
	sends   chan channel.Outgoing
	typings chan Typing

	mu     sync.Mutex
	status channel.Status
	fail   func(channel.Outgoing) error
	tries  []channel.Outgoing
	sent   []channel.Outgoing
	typing []Typing
}

var _ channel.Channel = (*Fake)(nil)

// New returns a connected fake channel named name.
func New(name string) *Fake {
	return &Fake{
		name:    name,
		sends:   make(chan channel.Outgoing, queued),
		typings: make(chan Typing, queued),
		status:  channel.Status{State: channel.StateConnected},
	}
}

// Name returns the name New was given.
func (f *Fake) Name() string { return f.name }

// Owns reports whether chat starts with "<name>:".
func (f *Fake) Owns(chat string) bool { return strings.HasPrefix(chat, f.name+":") }

// Connect returns nil at once.
func (f *Fake) Connect(context.Context) error { return nil }

// Status returns the status last set (connected at first).
func (f *Fake) Status() channel.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// SetStatus sets the state and detail Status reports.
func (f *Fake) SetStatus(state channel.ConnState, detail string) {
	f.mu.Lock()
	f.status = channel.Status{State: state, Detail: detail}
	f.mu.Unlock()
}

// FailWith has fn decide the error of every later send attempt (nil: the
// send succeeds). fn runs on the sender's goroutine, outside the fake's lock,
// so it may block.
func (f *Fake) FailWith(fn func(channel.Outgoing) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

// Send records the attempt, asks the function given to FailWith, and on
// success records m as sent, queues it on Sends and returns SentID(m.ID).
func (f *Fake) Send(_ context.Context, m channel.Outgoing) (string, error) {
	f.mu.Lock()
	f.tries = append(f.tries, m)
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(m); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	f.sent = append(f.sent, m)
	f.mu.Unlock()
	select {
	case f.sends <- m:
	default: // nobody reads (benchmarks): the record above is enough
	}
	return SentID(m.ID), nil
}

// SetTyping records the change and queues it on Typings.
func (f *Fake) SetTyping(_ context.Context, chat string, on bool) error {
	t := Typing{Chat: chat, On: on}
	f.mu.Lock()
	f.typing = append(f.typing, t)
	f.mu.Unlock()
	select {
	case f.typings <- t:
	default:
	}
	return nil
}

// Sends delivers each message sent, in order, while fewer than 100 wait.
func (f *Fake) Sends() <-chan channel.Outgoing { return f.sends }

// Typings delivers each typing change, in order, while fewer than 100 wait.
func (f *Fake) Typings() <-chan Typing { return f.typings }

// Tries returns every send attempt so far, failed ones included.
func (f *Fake) Tries() []channel.Outgoing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]channel.Outgoing(nil), f.tries...)
}

// TriesOf counts the send attempts of messages whose text is text.
func (f *Fake) TriesOf(text string) int {
	n := 0
	for _, m := range f.Tries() {
		if m.Text == text {
			n++
		}
	}
	return n
}

// Sent returns the messages sent so far.
func (f *Fake) Sent() []channel.Outgoing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]channel.Outgoing(nil), f.sent...)
}

// SentTexts returns the texts of the messages sent so far.
func (f *Fake) SentTexts() []string {
	var out []string
	for _, m := range f.Sent() {
		out = append(out, m.Text)
	}
	return out
}

// Typing returns the typing changes so far.
func (f *Fake) Typing() []Typing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Typing(nil), f.typing...)
}
