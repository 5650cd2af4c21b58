// Package channel defines how bridged talks to a chat network.
//
// A Channel delivers inbound messages to whatever stores them, through a
// small interface the channel package defines for itself (whatsapp.Sink,
// local.Inbound) and the ingest's Inbound satisfies; that call returns only
// after the commit, and the channel acknowledges upstream only after it
// returned nil, so a crash before the commit means the network redelivers.
// Outbound messages come from the outbox (DESIGN §4) and carry an id chosen
// before the first attempt, so a retried Send is idempotent where the
// network takes such an id (WhatsApp). Where it does not (Telegram), a send
// that may have arrived is ErrAmbiguous and is not retried.
//
// A polling channel (Telegram) commits each update it received together
// with its offset (store.PollAck), and confirms it to the network only by
// polling again after the commit. The behaviours every channel must have
// are a conformance suite, channeltest.Conform.
package channel

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ConnState is a channel's connection state.
type ConnState string

// Connection states.
const (
	StateConnecting   ConnState = "connecting"
	StateConnected    ConnState = "connected"
	StateReconnecting ConnState = "reconnecting"
	StateDisconnected ConnState = "disconnected"
	StateNotPaired    ConnState = "not-paired"
	StateLoggedOut    ConnState = "logged-out"
	StateReplaced     ConnState = "replaced"
	StateBanned       ConnState = "temporarily-banned"
	StateOutdated     ConnState = "client-outdated"
)

// Recoverable reports whether a channel in state s keeps trying to reconnect
// by itself.
func (s ConnState) Recoverable() bool {
	switch s {
	case StateConnecting, StateConnected, StateReconnecting, StateDisconnected, StateBanned:
		return true
	}
	return false
}

// Status is what a channel reports about itself.
type Status struct {
	State  ConnState `json:"state"`
	Detail string    `json:"detail,omitempty"` // what the owner should do, when anything
	Since  time.Time `json:"since"`
	// Health is the one word that says whether the channel really works:
	// HealthStable only when connected with no condition; otherwise the
	// worst of the state and the conditions. Empty for a channel that does
	// not report it.
	Health Health `json:"health,omitempty"`
	// Conditions are what limits the channel while it lasts (a
	// restriction, a flapping connection, a suspended group), each told to
	// the owner once.
	Conditions []Condition `json:"conditions,omitempty"`
	// Polled is when a channel that polls its network (Telegram) last
	// had an answer; zero for one that does not poll, or before.
	Polled time.Time `json:"polled,omitzero"`
}

// Health is a channel's health in one word.
type Health string

// Health values. A channel reports the worst that applies.
const (
	HealthStable       Health = "stable"         // connected, no condition
	HealthConnecting   Health = "connecting"     // connecting or reconnecting
	HealthFlapping     Health = "flapping"       // connected, but the connection keeps dropping
	HealthPhoneOffline Health = "phone-offline"  // the phone has not been online for days
	HealthAppStateSync Health = "app-state-sync" // app state (contacts, chat settings) out of sync
	HealthRestricted   Health = "restricted"     // connected, but WhatsApp restricts what it may send
	HealthBanned       Health = "banned"
	HealthLoggedOut    Health = "logged-out"
	HealthOutdated     Health = "outdated"
	HealthReplaced     Health = "replaced"
	HealthNotPaired    Health = "not-paired"
	HealthDown         Health = "down" // disconnected, retrying
)

// Condition is one thing that limits a channel while it lasts.
type Condition struct {
	// Key names the condition, stable while it lasts:
	// "reachout-timelock", "flapping", "suspended/<chat>".
	Key string `json:"key"`
	// Health is how it shows in Status.Health.
	Health Health `json:"health"`
	// Text says what it means and what to do, for the owner.
	Text string `json:"text"`
	// Since is when it began; Until when it ends, zero when unknown.
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"`
}

// Message is one inbound message, normalised by the channel.
type Message struct {
	Chat       string // chat id, e.g. "120363…@g.us" or "local:main"
	ChatName   string // display name when known
	IsGroup    bool
	ExternalID string // the network's message id, unique per chat
	Sender     string // stable sender id
	SenderName string // display name
	// SenderAlt are the sender's other ids the channel knows (on WhatsApp
	// its LID for a phone number, or the other way round): a group's allow
	// list entry in any of these forms admits the sender.
	SenderAlt []string
	// SenderAdmin reports that the sender is an admin of the chat (on
	// WhatsApp, by the group's metadata).
	SenderAdmin bool
	Text        string    // text, or a placeholder such as "[voice note]"
	SentAt      time.Time // the network's timestamp
	FromMe      bool      // sent by the account bridged is logged in as
	IsBot       bool      // sent by bridged itself (an id the outbox chose)
	Mentioned   bool      // the bot's own number or LID is mentioned
	// QuotedID is the network id of the message this one quotes (a reply),
	// empty when it quotes nothing.
	QuotedID string
	// Reaction, when set, makes this message a reaction to another: it is
	// not a prompt and carries no Text of its own.
	Reaction *Reaction
	// Media, when set, is an attachment fetched after the message is
	// stored; Text is then ignored and the stored text is
	// Media.Text(Media.Pending()) until the media settles.
	Media *Media
	// Backlog marks a message that reached bridged through a history sync:
	// it is stored as context and is late whatever its age, so it never
	// starts a turn.
	Backlog bool
}

// QuoteNote starts the line a channel appends to a reply's Text to show
// the agent what it quotes: "\n[in reply to NAME: \"...\"]".
const QuoteNote = "\n[in reply to "

// OwnText is what the sender wrote: Text without the quote note a reply
// (QuotedID set) carries at its end.
func (m Message) OwnText() string {
	if m.QuotedID == "" {
		return m.Text
	}
	if i := strings.LastIndex(m.Text, QuoteNote); i >= 0 {
		return m.Text[:i]
	}
	return m.Text
}

// Reaction is an emoji reaction to an earlier message of the same chat.
type Reaction struct {
	TargetID string // the network id of the message reacted to
	Emoji    string // the emoji, empty when a reaction is removed
}

// Media is an inbound message's attachment, stored with the message and
// fetched afterwards by the media worker (internal/media) into the group's
// inbox/, so that a slow file never holds the channel's event loop. The
// message's turn waits until its media settled (saved, failed or refused).
type Media struct {
	// Source names the fetcher that can get the file: "whatsapp" or
	// "upload" (a file posted through the control API).
	Source string
	// Ref is what that fetcher needs, opaque to everything else (JSON).
	Ref []byte
	// Label is the placeholder's label: "image", `document "a.pdf"`,
	// "voice note".
	Label string
	// Name is the file name to save it as in inbox/ (a plain name; the
	// worker makes it safe anyway).
	Name string
	MIME string
	// Size is the announced size in bytes, 0 when unknown.
	Size int64
	// Voice asks for a transcript (when transcription is configured).
	Voice bool
	// Seconds is the announced duration of audio, 0 when unknown.
	Seconds int
	// Head and Tail are the message's text before and after the
	// placeholder: the caption (and a newline) before, a quoted message
	// after.
	Head, Tail string
}

// Pending is the placeholder a message shows while its media is fetched.
func (m *Media) Pending() string { return "[" + m.Label + ": downloading]" }

// Text is the message's text with placeholder between Head and Tail.
func (m *Media) Text(placeholder string) string { return m.Head + placeholder + m.Tail }

// AttachmentKind is how a file is presented to the recipient.
type AttachmentKind string

// The attachment kinds.
const (
	KindImage    AttachmentKind = "image"
	KindAudio    AttachmentKind = "audio"
	KindDocument AttachmentKind = "document"
)

// Attachment is a file sent with a message: a daemon-owned copy on disk
// that stays unchanged while the message is pending.
type Attachment struct {
	Path string // the copy, absolute
	Name string // the file name shown to the recipient
	MIME string
	Kind AttachmentKind
	Size int64
}

// Outgoing is one message to send.
type Outgoing struct {
	Chat string
	Text string // with an Attachment, its caption
	// Attachment, when set, is sent with Text (a channel that cannot put
	// a caption on this kind of file sends Text right after it).
	Attachment *Attachment
	// ID is chosen before the first attempt and reused on every retry, so a
	// channel that supports it can make retries idempotent.
	ID string
	// Notice marks a message of bridged's own (an approval request, an
	// alert), never an agent's text: a channel may add controls to it
	// (Telegram's buttons under an approval request).
	Notice bool
}

// ErrPermanent is wrapped by Send errors that a retry cannot fix (unknown
// chat, not paired, logged out).
var ErrPermanent = errors.New("permanent send failure")

// ErrAmbiguous is wrapped, with ErrPermanent, by the error of a send that
// may or may not have reached the network: the request was written and no
// answer came. On a network without an idempotent send (Telegram) a retry
// could deliver it twice, so it is recorded as such and not retried.
var ErrAmbiguous = errors.New("ambiguous send: the request was written but no answer came, so it may have arrived; not sent again")

// Channel is a chat network.
type Channel interface {
	// Name is the channel's name, e.g. "whatsapp" or "local".
	Name() string
	// Owns reports whether chat ids of this form belong to this channel. It
	// does not block.
	Owns(chat string) bool
	// Connect returns once connected or when ctx ends; it keeps reconnecting
	// in the background until ctx ends. An unpaired channel returns nil at
	// once and reports StateNotPaired.
	Connect(ctx context.Context) error
	// Send delivers m and returns the network's id for it. It blocks until
	// the network accepted the message; errors wrapping ErrPermanent must not
	// be retried.
	Send(ctx context.Context, m Outgoing) (sentID string, err error)
	// SetTyping shows or hides the typing indicator. Best effort.
	SetTyping(ctx context.Context, chat string, on bool) error
	// Status reports the connection state. It does not block.
	Status() Status
}
