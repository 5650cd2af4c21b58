package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/bridged-app/bridged/internal/channel"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
)

// ChannelName is the channel's name.
const ChannelName = "whatsapp"

// Sink is where the client hands what it receives. It is defined here, by
// its consumer, and kept to what the channel needs; the daemon implements it
// over the router and the store. Every method gets the context of the event
// being handled, so a closed client cancels what it started.
type Sink interface {
	// Inbound stores one message of a registered chat together with its
	// chat's metadata (the one chat write for that message) and returns the
	// message's id after the commit; a reaction comes here too, with
	// Reaction set and no text. An error withholds the acknowledgement,
	// so WhatsApp redelivers the message.
	Inbound(ctx context.Context, m channel.Message) (bridgedstore.MessageID, error)
	// ChatSeen records a chat's metadata (name "" when unknown) when no
	// message is stored through Inbound: a message in a chat that is not
	// registered or that is no prompt (a revoke, a poll vote), a group joined or
	// renamed, every group at a group sync.
	ChatSeen(ctx context.Context, chat, name string, isGroup bool) error
	// IsRegistered reports whether chat is a registered group: only those
	// get their text and media stored. When it cannot tell, it says yes:
	// Inbound decides again when the message is inserted.
	IsRegistered(ctx context.Context, chat string) bool
	// IsOwnMessage reports whether id in chat is a message the outbox sent.
	IsOwnMessage(ctx context.Context, chat, id string) bool
}

// Options configures a Client. All fields but Sink are optional.
type Options struct {
	// Sink is where received messages and chats go (required).
	Sink Sink
	// StorePath is whatsmeow's device store, <home>/store/whatsapp.db.
	StorePath string
	// AssistantName is the assistant's display name ("Andy").
	AssistantName string
	// SharedNumber is true when the assistant uses the owner's own number:
	// every sent message is then prefixed "<AssistantName>: ".
	SharedNumber bool
	// AlwaysOnline keeps the account available for as long as it is
	// connected. Off, it is available only while an agent works in one of
	// its chats (between SetTyping on and off) and unavailable otherwise,
	// so the owner's phone still gets notifications.
	AlwaysOnline bool
	// Log is the channel's logger.
	Log zerolog.Logger
}

func (o *Options) validate() {
	if o.AssistantName == "" {
		o.AssistantName = "Andy"
	}
}

// GroupInfo is a WhatsApp group the account is a member of.
type GroupInfo struct {
	ID        string // "120363…@g.us"
	Name      string
	Suspended bool // WhatsApp suspended the group
}

// Client is the WhatsApp channel.
type Client struct {
	opts Options
	log  zerolog.Logger
	wa   waClient
	ds   *deviceStore // nil in tests
	ver  *versioner

	// base is cancelled by Close; it bounds typing loops and event handling.
	base       context.Context
	cancelBase context.CancelFunc
	wg         sync.WaitGroup // every goroutine the client starts, through spawn
	lifeMu     sync.Mutex     // orders spawn's wg.Add before Close's wg.Wait
	closed     bool           // guarded by lifeMu: Close has begun, spawn starts nothing

	mu          sync.Mutex
	sink        Sink // Options.Sink; never changes
	status      channel.Status
	changed     chan struct{} // closed and replaced on every status change
	started     bool
	attempts    int // failed connection attempts since the last success
	job         job // the supervisor's next job
	outdatedTry bool

	typingMu   sync.Mutex               // guards the two maps below, never held across a call out
	typing     map[string]*typingLoop   // a chat's running typing loop
	typingTurn map[string]chan struct{} // a chat's one-slot turn: one SetTyping per chat at a time
	working    map[string]bool          // chats whose agent works (typing on): the account is available

	presenceMu   sync.Mutex     // held across a presence send: one at a time, the last one current
	presenceSent types.Presence // what WhatsApp has from this connection; "" none yet

	wake      chan struct{} // supervisor: job changed
	connected chan struct{} // worker: send presence and sync groups
	presence  chan struct{} // worker: send presence (the push name came, or working changed)
	// historyWake: a history sync was queued, or a connection began
	historyWake chan struct{}
	closeOnce   sync.Once

	sent *recentIDs
	now  func() time.Time

	admins adminCache // the groups' admins (admins.go)

	cond   *conditions // restrictions and flapping (health.go)
	upkeep *upkeep     // app state and phone liveness (upkeep.go)
}

var _ channel.Channel = (*Client)(nil)

// New opens the device store at opts.StorePath and prepares a client. It
// never waits for a QR code or the network: an unpaired store gives a client
// whose Connect returns at once with Status not-paired.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.Sink == nil {
		return nil, errors.New("whatsapp: no sink")
	}
	opts.validate()
	log := opts.Log.With().Str("component", "whatsapp").Logger()
	ds, err := openStore(ctx, opts.StorePath, opts.Log)
	if err != nil {
		return nil, err
	}
	device, err := ds.container.GetFirstDevice(ctx)
	if err != nil {
		_ = ds.Close()
		return nil, fmt.Errorf("load whatsapp device: %w", err)
	}
	waLevel := zerolog.InfoLevel
	if log.GetLevel() <= zerolog.TraceLevel {
		waLevel = zerolog.DebugLevel
	}
	wlog := opts.Log.With().Str("component", "whatsmeow").Logger().Level(max(waLevel, log.GetLevel()))
	wc := whatsmeow.NewClient(device, waLog.Zerolog(wlog))
	wc.EnableAutoReconnect = false // the supervisor reconnects, with a capped backoff
	wc.SynchronousAck = true       // ack only after the handler committed the message
	wc.EnableDecryptedEventBuffer = true
	wc.AutomaticMessageRerequestFromPhone = true
	wc.UseRetryMessageStore = true
	wc.ManualHistorySyncDownload = true // queued and downloaded by bridged (historysync.go)
	wc.BackgroundEventCtx = wlog.WithContext(context.Background())

	ver := newVersioner(ds, log)
	ver.applyCached(ctx)

	c := newClient(opts, realClient{wc}, ver)
	c.ds = ds
	c.loadConditions(ctx)
	c.upkeep.kv = ds
	wc.AddEventHandlerWithSuccessStatus(c.handleEvent)
	return c, nil
}

// newClient builds a client around wa. opts must be validated.
func newClient(opts Options, wa waClient, ver *versioner) *Client {
	base, cancel := context.WithCancel(context.Background())
	c := &Client{
		opts:        opts,
		log:         opts.Log.With().Str("component", "whatsapp").Logger(),
		sink:        opts.Sink,
		wa:          wa,
		ver:         ver,
		base:        base,
		cancelBase:  cancel,
		changed:     make(chan struct{}),
		typing:      make(map[string]*typingLoop),
		typingTurn:  make(map[string]chan struct{}),
		working:     make(map[string]bool),
		wake:        make(chan struct{}, 1),
		connected:   make(chan struct{}, 1),
		presence:    make(chan struct{}, 1),
		historyWake: make(chan struct{}, 1),
		sent:        newRecentIDs(4096),
		now:         time.Now,
		cond:        newConditions(),
		upkeep:      newUpkeep(),
	}
	c.status = channel.Status{State: channel.StateDisconnected, Since: c.now()}
	if !wa.Paired() {
		c.setState(channel.StateNotPaired, detailNotPaired)
	}
	return c
}

// Name returns "whatsapp".
func (c *Client) Name() string { return ChannelName }

// Owns reports whether chat is a WhatsApp chat id (group, phone number or
// LID). It does not block.
func (c *Client) Owns(chat string) bool { return Owns(chat) }

// Owns reports whether chat is a WhatsApp chat id (group, phone number or
// LID).
func Owns(chat string) bool {
	for _, suffix := range []string{"@g.us", "@s.whatsapp.net", "@lid"} {
		if strings.HasSuffix(chat, suffix) && len(chat) > len(suffix) {
			return true
		}
	}
	return false
}

// Status reports the connection state and what the owner should do about
// it, its health and the conditions in force (a restriction, flapping, the
// app state out of sync, the phone offline). It does not block.
func (c *Client) Status() channel.Status {
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	return c.withHealth(st, c.now())
}

// StateMetricName is the gauge StateMetric reports.
const StateMetricName = "bridged_whatsapp_state"

// StateMetric returns the connection state as a gauge for /metrics: 1
// connected, 2 connecting, 3 reconnecting, 4 disconnected, 5 not paired,
// 6 logged out, 7 replaced by another client, 8 temporarily banned, 9 client
// outdated.
func (c *Client) StateMetric() (name string, value int) {
	return StateMetricName, stateCode(c.Status().State)
}

func stateCode(s channel.ConnState) int {
	switch s {
	case channel.StateConnected:
		return 1
	case channel.StateConnecting:
		return 2
	case channel.StateReconnecting:
		return 3
	case channel.StateDisconnected:
		return 4
	case channel.StateNotPaired:
		return 5
	case channel.StateLoggedOut:
		return 6
	case channel.StateReplaced:
		return 7
	case channel.StateBanned:
		return 8
	case channel.StateOutdated:
		return 9
	}
	return 0
}

// Connect starts connecting and returns nil once connected, or once the state
// needs the owner (not paired, logged out, replaced, banned, outdated), or
// ctx.Err() when ctx ends first. Reconnection keeps running in the background
// until ctx ends or Close is called.
func (c *Client) Connect(ctx context.Context) error {
	if !c.wa.Paired() {
		c.setState(channel.StateNotPaired, detailNotPaired)
		return nil
	}
	c.start(ctx)
	for {
		c.mu.Lock()
		st, changed := c.status.State, c.changed
		c.mu.Unlock()
		if st == channel.StateConnected || needsOwner(st) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// needsOwner reports states that only the owner can end.
func needsOwner(s channel.ConnState) bool {
	switch s {
	case channel.StateNotPaired, channel.StateLoggedOut, channel.StateReplaced, channel.StateBanned, channel.StateOutdated:
		return true
	}
	return false
}

// start launches the supervisor and the worker once.
func (c *Client) start(ctx context.Context) {
	c.mu.Lock()
	if c.started || c.base.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.started = true
	c.mu.Unlock()

	runCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.base, cancel)
	c.setState(channel.StateConnecting, "")
	c.schedule(jobStart, 0)
	if !c.spawn(func() {
		defer stop()
		defer cancel()
		c.supervise(runCtx)
	}) {
		stop()
		cancel()
		return
	}
	c.spawn(func() { c.work(runCtx) })
	c.spawn(func() { c.historyLoop(runCtx) })
}

// spawn runs fn on its own goroutine, which Close waits for, and reports
// whether it did: once Close has begun it starts nothing. Every goroutine
// of the client starts here, so no wg.Add can race Close's wg.Wait.
func (c *Client) spawn(fn func()) bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// Close disconnects, stops every background goroutine and closes the device
// store. It is safe to call more than once.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.lifeMu.Lock()
		c.closed = true
		c.lifeMu.Unlock()
		c.cancelBase()
		c.wg.Wait()
		c.wa.Disconnect()
		if c.ds != nil {
			if cerr := c.ds.Close(); cerr != nil {
				err = fmt.Errorf("close whatsapp store: %w", cerr)
			}
		}
	})
	return err
}

// setState records a new status, logging it once with what to do.
func (c *Client) setState(state channel.ConnState, detail string) {
	c.mu.Lock()
	if c.status.State == state && c.status.Detail == detail {
		c.mu.Unlock()
		return
	}
	c.status = channel.Status{State: state, Detail: detail, Since: c.now()}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()

	ev := c.log.Info()
	switch {
	case state == channel.StateReconnecting || state == channel.StateDisconnected || state == channel.StateNotPaired:
		ev = c.log.Warn()
	case needsOwner(state):
		ev = c.log.Error()
	}
	if state == channel.StateNotPaired {
		ev.Str("state", string(state)).Msg("WhatsApp is not paired; run `bridged login` to pair (local chats keep working)")
		return
	}
	ev.Str("state", string(state)).Str("detail", detail).Msg("whatsapp connection state changed")
}

// errNotConnected is returned by calls that need a live connection.
var errNotConnected = errors.New("whatsapp is not connected")
