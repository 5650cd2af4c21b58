// Package media fetches the media of inbound messages into their group's
// inbox/ after the message is stored, off the channel's event loop.
//
// A channel stores a message with a reference to its media (what its
// Fetcher needs to get the file later: for WhatsApp the encrypted file's
// path and keys, for a posted file its upload key) in the same transaction
// as the message, and acknowledges it upstream at once. The Pool then
// fetches the file with a bounded number of workers (Config.Workers, at most
// one per chat, so one slow file delays only its own chat), writes it
// through internal/home's tree (a fresh temporary file renamed into place,
// never through a link the agent planted), transcribes voice notes when a
// Transcriber is set, and settles the media: the message's placeholder
// becomes the file's path, the transcript, or why there is none, in one
// transaction (store.SettleMedia). Until then the router holds that message
// and every later one of its chat (store.PendingMessages), so the agent
// never sees a half-fetched file and messages keep their order; Settled
// tells the router to look again.
//
// Below the free-space floor (Config.Floor) a media is not downloaded: it
// settles failed with a placeholder that says the disk is almost full.
//
// Nothing is lost on a crash: media still pending at start are fetched again
// (a file already saved under its name is kept and not fetched twice).
// Every fetch start is counted, so a file that takes the daemon down each
// time is given up on after Config.MaxStarts starts. A shutdown leaves the
// media in flight pending.
//
// Deps.Settled takes no context: the media is settled in the store by then,
// and Settled only signals the router to look at the chat again (it marks
// the chat and wakes the message loop, without blocking), so there is no
// work for a context to bound.
package media

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultWorkers   = 3
	DefaultMaxBytes  = 20 << 20
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxStarts = 3
)

// DefaultRetryDelays returns the waits between the attempts of one fetch,
// a new slice on every call.
func DefaultRetryDelays() []time.Duration { return []time.Duration{2 * time.Second, 10 * time.Second} }

// ErrTooLarge is wrapped by fetch errors of files over the size limit.
var ErrTooLarge = errors.New("file is larger than the download limit")

// Fetcher gets the file a media refers to.
type Fetcher interface {
	// Fetch writes m's file into dst (a new, empty file of the inbox),
	// failing with an error wrapping ErrTooLarge once it would grow past
	// limit bytes. It must not keep dst.
	Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error
}

// Cleaner is implemented by fetchers whose source can go once the media
// settled (a posted file's upload).
type Cleaner interface {
	Cleanup(m store.Media)
}

// Pruner is implemented by fetchers whose sources can outlive their media
// (a posted file whose message was never committed): Run calls Prune once
// at start with the media pending then.
type Pruner interface {
	Prune(pending []store.Media)
}

// Transcriber turns a voice note into text (internal/transcribe.Client).
type Transcriber interface {
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// Config tunes a Pool. Zero values mean the defaults.
type Config struct {
	Workers   int           // files fetched at once, over all chats
	MaxBytes  int64         // largest file fetched
	Timeout   time.Duration // bound on one fetch attempt
	MaxStarts int           // fetch starts (over restarts) before giving up
	// RetryDelays are the waits between the attempts of one fetch (nil:
	// DefaultRetryDelays; empty: one attempt).
	RetryDelays []time.Duration
	// Floor is the free space the home's disk keeps: below it a media is
	// not downloaded (it settles failed, and the agent sees why). The zero
	// Floor has none.
	Floor home.Floor
}

// Deps are the parts a Pool works with.
type Deps struct {
	Store    *store.DB
	Home     *home.Home
	Fetchers map[string]Fetcher // by store.Media.Source
	// Transcriber, when set, transcribes voice notes.
	Transcriber Transcriber
	// Queue is where the media to fetch are added (NewQueue); nil: a
	// queue of the Pool's own, fed by Add.
	Queue *Queue
	// Settled is called once a chat's media settled (the Ingest's
	// MediaSettled, which wakes the router). A signal: it must not block.
	Settled func(chat store.ChatID)
	Log     zerolog.Logger
}

// Pool fetches media. Add may be called before Run; nothing is fetched
// until Run.
type Pool struct {
	cfg  Config
	d    Deps
	log  zerolog.Logger
	sch  *scheduler
	wait func(ctx context.Context, d time.Duration) error
}

// New builds a pool.
func New(cfg Config, d Deps) (*Pool, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("new media pool: no store")
	case d.Home == nil:
		return nil, errors.New("new media pool: no home")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxStarts <= 0 {
		cfg.MaxStarts = DefaultMaxStarts
	}
	if cfg.RetryDelays == nil {
		cfg.RetryDelays = DefaultRetryDelays()
	}
	if d.Settled == nil {
		d.Settled = func(store.ChatID) {}
	}
	if d.Queue == nil {
		d.Queue = NewQueue()
	}
	return &Pool{cfg: cfg, d: d, log: d.Log.With().Str("component", "media").Logger(), sch: d.Queue.s, wait: sleep}, nil
}

// Run fetches the media pending in the store, then every media added, until
// ctx ends; it returns once the fetches in flight have stopped.
func (p *Pool) Run(ctx context.Context) error {
	pending, err := p.d.Store.Media.Pending(ctx)
	if err != nil {
		return fmt.Errorf("media pool: %w", err)
	}
	if len(pending) > 0 {
		p.log.Info().Int("media", len(pending)).Msg("resuming media fetches left pending")
	}
	for _, f := range p.d.Fetchers {
		if pr, ok := f.(Pruner); ok {
			pr.Prune(pending)
		}
	}
	for _, m := range pending {
		p.sch.add(m)
	}
	p.sch.run(ctx, p.cfg.Workers, func(m store.Media) { p.process(ctx, m) })
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
