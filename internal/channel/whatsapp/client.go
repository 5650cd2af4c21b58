package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
)

// ChannelName is the channel's name.
const ChannelName = "whatsapp"

// Sink is where the client hands what it receives. It is defined here, by
// its consumer, and kept to what the channel needs; the daemon implements it
// over the router and the store. Every method gets the context of the event
// being handled, so a closed client cancels what it started.
type Sink interface {
	// Lookup looks chat up in the registry: the one lookup of a message's
	// group on its way in. Only a registered chat's message is built, and
	// Inbound takes what Lookup found instead of looking again. An error
	// withholds the acknowledgement, so WhatsApp redelivers the message.
	Lookup(ctx context.Context, chat string) (ingest.Changed, error)
	// Inbound stores one message of a registered chat together with its
	// chat's metadata (the one chat write for that message) and returns the
	// message's id after the commit; seen is the chat as Lookup found it. A
	// reaction comes here too, with Reaction set and no text. An error
	// withholds the acknowledgement, so WhatsApp redelivers the message.
	Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (bridgedstore.MessageID, error)
	// ChatSeen records a chat's metadata (name "" when unknown) when no
	// message is stored through Inbound: a message in a chat that is not
	// registered or that is no prompt (a revoke, a poll vote), a group joined or
	// renamed, every group at a group sync.
	ChatSeen(ctx context.Context, chat, name string, isGroup bool) error
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

// Client is the WhatsApp channel: a thin composition of owned parts, each
// with its own state and lock, wired in newClient and nowhere else. It
// implements channel.Channel, dispatches whatsmeow's events to the part
// that owns them (events.go) and runs the worker that serves a new
// connection. Every part embeds the one *core.
type Client struct {
	*core
	ds *deviceStore // nil in tests

	conn     *connection   // state, reconnection, the web version
	in       *inbound      // messages received, converted, handed to the sink
	out      *sender       // text and files sent, the ids recently sent
	pres     *presence     // typing indicators and the account's presence
	groups   *groupSync    // the joined groups and their admins
	hist     *history      // history sync, stored as backlog
	restrict *restrictions // WhatsApp's restrictions, the kept conditions
	app      *appState     // app-state collections out of sync, healed
	phone    *liveness     // when the phone was last seen, and its ping

	connected chan struct{} // worker: send presence and sync groups
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
	c.kv = ds
	c.restrict.load(ctx)
	wc.AddEventHandlerWithSuccessStatus(c.handleEvent)
	return c, nil
}

// newClient builds a client around wa and wires its parts. opts must be
// validated.
func newClient(opts Options, wa waClient, ver *versioner) *Client {
	co := newCore(opts, wa)
	cond := newConditions()
	conn := newConnection(co, ver, cond)
	ids := &identities{core: co}
	restrict := &restrictions{core: co, cond: cond}
	groups := &groupSync{core: co, conn: conn, ids: ids, restrict: restrict}
	sent := newRecentIDs(4096)
	in := &inbound{core: co, ids: ids, groups: groups, sent: sent}
	c := &Client{
		core:      co,
		conn:      conn,
		in:        in,
		out:       &sender{core: co, conn: conn, restrict: restrict, sent: sent},
		pres:      newPresence(co, conn),
		groups:    groups,
		hist:      &history{core: co, conn: conn, in: in, wake: make(chan struct{}, 1)},
		restrict:  restrict,
		app:       newAppState(co),
		phone:     &liveness{core: co},
		connected: make(chan struct{}, 1),
	}
	conn.fresh = []chan struct{}{c.connected, c.hist.wake}
	conn.init()
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
	now := c.now()
	conds := c.restrict.cond.list(now)
	for _, cond := range []func() (channel.Condition, bool){c.app.condition, c.phone.condition} {
		if cd, ok := cond(); ok {
			conds = append(conds, cd)
		}
	}
	return withHealth(c.conn.current(), conds)
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
		c.conn.setState(channel.StateNotPaired, detailNotPaired)
		return nil
	}
	c.start(ctx)
	return c.conn.settled(ctx)
}

// start launches the supervisor, the worker and the history loop once.
func (c *Client) start(ctx context.Context) {
	if !c.conn.begin() {
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.base, cancel)
	c.conn.setState(channel.StateConnecting, "")
	c.conn.schedule(jobStart, 0)
	if !c.spawn(func() {
		defer stop()
		defer cancel()
		c.conn.supervise(runCtx)
	}) {
		stop()
		cancel()
		return
	}
	c.spawn(func() { c.work(runCtx) })
	c.spawn(func() { c.hist.loop(runCtx) })
}

// work sends presence and refreshes group names after each connection and
// once a day, and pings a phone long offline, outside the event handler.
func (c *Client) work(ctx context.Context) {
	daily := time.NewTimer(groupSyncInterval)
	defer daily.Stop()
	phone := time.NewTicker(phoneCheckInterval)
	defer phone.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-phone.C:
			if c.conn.state() == channel.StateConnected {
				c.phone.maybePing()
			}
		case <-c.pres.wake:
			c.pres.sync(ctx)
		case <-c.connected:
			c.pres.reset()
			c.pres.sync(ctx)
			c.groups.sync(ctx)
			daily.Reset(groupSyncInterval)
		case <-daily.C:
			if c.conn.state() == channel.StateConnected {
				c.groups.sync(ctx)
			}
			daily.Reset(groupSyncInterval)
		}
	}
}

// Close disconnects, stops every background goroutine and closes the device
// store. It is safe to call more than once.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.stop()
		c.wa.Disconnect()
		if c.ds != nil {
			if cerr := c.ds.Close(); cerr != nil {
				err = fmt.Errorf("close whatsapp store: %w", cerr)
			}
		}
	})
	return err
}

// Send delivers m, split into parts of at most MaxMessageRunes, and returns
// the WhatsApp id of the first part (MessageID(m.ID)). Each part's id is
// derived from m.ID, so a retry after a timeout resends the same ids and
// WhatsApp shows each message once; parts already acknowledged in this
// process are not sent again. Errors wrapping channel.ErrPermanent (unknown
// chat, not paired, logged out, refused by WhatsApp) must not be retried.
//
// A message with an Attachment is uploaded and sent as an image, audio or
// document message under MessageID(m.ID), the first text part as its caption
// (audio takes none: all its text follows it as parts 1, 2, …).
func (c *Client) Send(ctx context.Context, m channel.Outgoing) (string, error) {
	return c.out.send(ctx, m)
}

// SetTyping shows "composing" in chat while on (repeated so it does not
// fade while the agent works) and "paused" when turned off. Best effort:
// see presence.set.
func (c *Client) SetTyping(ctx context.Context, chat string, on bool) error {
	return c.pres.set(ctx, chat, on)
}

// Groups lists the groups the account is a member of, sorted by name, and
// notes each one's admins. It asks WhatsApp, so it needs a connection.
func (c *Client) Groups(ctx context.Context) ([]GroupInfo, error) { return c.groups.list(ctx) }

// RefreshGroups fetches the joined groups and records each one's name
// through the sink's ChatSeen. It returns how many groups were recorded. It
// runs on every connection, daily, and on request (list_groups refresh).
func (c *Client) RefreshGroups(ctx context.Context) (int, error) { return c.groups.refresh(ctx) }

// PhoneLastSeen is when the phone was last seen online, zero when unknown.
func (c *Client) PhoneLastSeen() time.Time { return c.phone.lastSeen() }

// errNotConnected is returned by calls that need a live connection.
var errNotConnected = errors.New("whatsapp is not connected")
