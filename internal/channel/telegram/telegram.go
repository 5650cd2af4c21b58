package telegram

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// ChannelName is the channel's name.
const ChannelName = "telegram"

// Prefix starts every Telegram chat and sender id.
const Prefix = "tg:"

// DefaultAPIURL is the Bot API's address.
const DefaultAPIURL = "https://api.telegram.org"

// Owns reports whether chat is a Telegram chat id: "tg:" and a decimal
// integer (negative for groups).
func Owns(chat string) bool {
	_, ok := ChatNumber(chat)
	return ok
}

// ChatNumber returns the Telegram id of chat "tg:<id>".
func ChatNumber(chat string) (int64, bool) {
	s, ok := strings.CutPrefix(chat, Prefix)
	if !ok || s == "" || s[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n != 0
}

// ChatID is the chat id of Telegram chat n.
func ChatID(n int64) string { return Prefix + strconv.FormatInt(n, 10) }

// Sink is where the channel delivers. Every call returns only after its
// commit.
type Sink interface {
	// Inbound stores m and commits ack with it, in one transaction
	// (ingest.Ingest.InboundPolled). An error wrapping store.ErrExists:
	// the update was committed before and nothing was stored.
	Inbound(ctx context.Context, m channel.Message, ack store.PollAck) (store.MessageID, error)
	// Seen records a chat the bot was added to or removed from, and
	// commits ack with it. store.ErrExists as for Inbound.
	Seen(ctx context.Context, chat, name string, isGroup bool, ack store.PollAck) error
	// Ack commits an update that carries nothing bridged keeps.
	Ack(ctx context.Context, ack store.PollAck) error
	// Next returns the id of the channel's next update not committed.
	Next(ctx context.Context) (int64, error)
}

// Options configure a Client.
type Options struct {
	Token  string // the bot's token; empty: the channel reports not-paired
	APIURL string // the Bot API's address; empty: DefaultAPIURL
	// Owner is the owner's Telegram user id; 0: nobody's messages are the
	// owner's (no approvals from Telegram).
	Owner         int64
	AssistantName string
	Sink          Sink
	Log           zerolog.Logger
	// PollTimeout is getUpdates' long-poll timeout; 0: 25 s.
	PollTimeout time.Duration
	// HTTP is the client the Bot API calls use; nil: a client of their own.
	HTTP *http.Client
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Client is the Telegram channel. Its methods are safe for concurrent use.
// It is a thin composition: its core holds the state and the connection's
// health; the poller (poll.go, inbound.go), the sender and the typist
// (send.go) are its parts, each a view of the core.
type Client struct{ *core }

// core is the client's state, shared by its parts under mu.
type core struct {
	opts Options
	log  zerolog.Logger
	api  *bot.Bot // nil without a token
	url  string
	http *http.Client

	mu     sync.Mutex
	me     models.User
	status channel.Status
	conds  map[string]channel.Condition
	hold   time.Time // no Bot API call before this (a 429's retry_after)
	parts  map[string][]string
	polled time.Time // the last getUpdates that answered
	typing map[string]context.CancelFunc
	ctx    context.Context // Connect's, for typing refreshes; nil before
	wg     sync.WaitGroup

	admins adminCache

	// callTimeout bounds a Bot API call (and a long poll beyond its own
	// timeout); typingEvery is the typing indicator's refresh. Tests
	// shorten them.
	callTimeout, typingEvery time.Duration
	// firstBackoff is the wait after a first failed poll; it doubles up
	// to maxBackoff.
	firstBackoff time.Duration
}

var _ channel.Channel = (*Client)(nil)

// New builds a client; nothing is sent before Connect.
func New(opts Options) (*Client, error) {
	if opts.Sink == nil {
		return nil, errors.New("new telegram client: no sink")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 25 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	hc := opts.HTTP
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c := &core{
		opts: opts, log: opts.Log.With().Str("component", "telegram").Logger(),
		url: strings.TrimSuffix(opts.APIURL, "/"), http: hc,
		conds: map[string]channel.Condition{}, parts: map[string][]string{}, typing: map[string]context.CancelFunc{},
		callTimeout: callTimeout, typingEvery: typingEvery, firstBackoff: 500 * time.Millisecond,
	}
	c.admins.entries = map[int64]adminEntry{}
	c.status = channel.Status{State: channel.StateConnecting, Since: opts.Now()}
	if strings.TrimSpace(opts.Token) == "" {
		c.status = channel.Status{State: channel.StateNotPaired, Since: opts.Now(),
			Detail: "no bot token: put BRIDGED_TELEGRAM_TOKEN in the env file and run `bridged login telegram`"}
		return &Client{c}, nil
	}
	api, err := bot.New(opts.Token, bot.WithSkipGetMe(), bot.WithServerURL(c.url), bot.WithHTTPClient(opts.PollTimeout, hc),
		bot.WithErrorsHandler(func(error) {}))
	if err != nil {
		return nil, fmt.Errorf("new telegram client: %w", err)
	}
	c.api = api
	return &Client{c}, nil
}

// Name returns "telegram".
func (c *Client) Name() string { return ChannelName }

// Owns reports whether chat is a Telegram chat id.
func (c *Client) Owns(chat string) bool { return Owns(chat) }

// Me returns the bot's user as getMe last reported it.
func (c *core) Me() models.User {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.me
}

// Status reports the state, the conditions and the health word.
func (c *core) Status() channel.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	for _, k := range slices.Sorted(maps.Keys(c.conds)) {
		st.Conditions = append(st.Conditions, c.conds[k])
	}
	st.Health = health(st)
	st.Polled = c.polled
	return st
}

func health(st channel.Status) channel.Health {
	switch st.State {
	case channel.StateConnected:
		// A condition that limits the channel (a conflict) shows; a
		// warning (privacy mode, a chat that refused the bot) does not.
		for _, c := range st.Conditions {
			if c.Health != channel.HealthStable {
				return c.Health
			}
		}
		return channel.HealthStable
	case channel.StateNotPaired:
		return channel.HealthNotPaired
	case channel.StateLoggedOut:
		return channel.HealthLoggedOut
	case channel.StateReplaced:
		return channel.HealthReplaced
	case channel.StateConnecting, channel.StateReconnecting:
		return channel.HealthConnecting
	}
	return channel.HealthDown
}

// setState changes the state, logging a change once.
func (c *core) setState(s channel.ConnState, detail string) {
	c.mu.Lock()
	changed := c.status.State != s
	if changed {
		c.status = channel.Status{State: s, Detail: detail, Since: c.opts.Now()}
	}
	c.mu.Unlock()
	if changed {
		c.log.Info().Str("state", string(s)).Msg("telegram state changed")
	}
}

// setCondition records a condition (told to the owner once by the alerts);
// clearCondition ends it.
func (c *core) setCondition(key string, h channel.Health, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.conds[key]; ok {
		return
	}
	c.conds[key] = channel.Condition{Key: key, Health: h, Text: text, Since: c.opts.Now()}
}

func (c *core) clearCondition(key string) {
	c.mu.Lock()
	delete(c.conds, key)
	c.mu.Unlock()
}

// Connect checks the token with getMe, then polls for updates in the
// background until ctx ends. Without a token it returns nil at once (the
// state says not-paired); a revoked token (401) returns nil too, with the
// state logged-out. It returns once the first getMe answered or ctx ended.
func (c *Client) Connect(ctx context.Context) error {
	if c.api == nil {
		return nil
	}
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	delay := time.Second
	for {
		err := c.checkMe(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, bot.ErrorUnauthorized) {
			c.revoked()
			return nil
		}
		c.setState(channel.StateReconnecting, "")
		c.log.Warn().Err(err).Dur("retry_in", delay).Msg("telegram getMe failed; retrying")
		if !sleep(ctx, delay) {
			return nil
		}
		delay = min(delay*2, maxBackoff)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				c.log.Error().Interface("panic", r).Msg("telegram poll loop panicked; polling stopped")
				c.setState(channel.StateDisconnected, "the poll loop failed; restart bridged")
			}
		}()
		poller{c.core}.poll(ctx)
	}()
	return nil
}

// Wait waits for the goroutines Connect and SetTyping started, after the
// context given to Connect ended.
func (c *Client) Wait() { c.wg.Wait() }

// checkMe asks getMe and records the bot; a bot that cannot read all group
// messages (privacy mode on) is a condition.
func (c *core) checkMe(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	me, err := c.api.GetMe(cctx)
	if err != nil {
		return redact(err, c.opts.Token)
	}
	c.mu.Lock()
	c.me = *me
	c.mu.Unlock()
	if !me.CanReadAllGroupMessages {
		c.setCondition("privacy", channel.HealthStable, PrivacyWarning(me.Username))
	} else {
		c.clearCondition("privacy")
	}
	return nil
}

// PrivacyWarning is what the owner is told when the bot's privacy mode
// keeps group messages from it.
func PrivacyWarning(username string) string {
	return fmt.Sprintf("Telegram: the bot @%s has privacy mode on, so in groups it sees only commands, replies to it and mentions of it; "+
		"a trigger word alone is not seen. To have it see everything: in @BotFather, /setprivacy → Disable, then remove the bot from each group and add it again (or make it an admin).", username)
}

// revoked records a token Telegram refused (401).
func (c *core) revoked() {
	c.setState(channel.StateLoggedOut, "the bot token was refused (revoked?): make a new one with @BotFather → /token, put it in the env file as BRIDGED_TELEGRAM_TOKEN and run `bridged login telegram`, then restart bridged")
}

// Timeouts and backoffs of the Bot API calls.
const (
	callTimeout = 30 * time.Second
	maxBackoff  = 30 * time.Second
)

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// redact removes the token from err's text: the Bot API's URLs hold it.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return &redacted{err: err, text: strings.ReplaceAll(err.Error(), token, "<token>")}
}

type redacted struct {
	err  error
	text string
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }
