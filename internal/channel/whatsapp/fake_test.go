package whatsapp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/testlog"
)

// Identities used across the tests.
var (
	botPN      = types.NewJID("491700000001", types.DefaultUserServer)
	botLID     = types.NewJID("200000000000001", types.HiddenUserServer)
	alicePN    = types.NewJID("491700000002", types.DefaultUserServer)
	aliceLID   = types.NewJID("200000000000002", types.HiddenUserServer)
	bobPN      = types.NewJID("491700000003", types.DefaultUserServer)
	familyChat = types.NewJID("120363000000000001", types.GroupServer)
	otherChat  = types.NewJID("120363000000000002", types.GroupServer)
	msgTime    = time.Date(2026, 11, 22, 9, 29, 58, 0, time.Local)
)

type sentMessage struct {
	to   types.JID
	text string
	id   string
	msg  *waE2E.Message
}

type upload struct {
	data      []byte
	mediaType whatsmeow.MediaType
}

// fakeWA is a hand-written stand-in for *whatsmeow.Client.
type fakeWA struct {
	mu          sync.Mutex
	paired      bool
	pn, lid     types.JID
	lidToPN     map[types.JID]types.JID
	names       map[types.JID]string
	sent        []sentMessage
	sendErrs    []error // returned by successive SendMessage calls
	presences   []string
	connects    int
	connectErrs []error // returned by successive ConnectContext calls
	disconnects int
	groups      []*types.GroupInfo
	downloads   int
	uploads     []upload
	uploadErrs  []error // returned by successive Upload calls
	download    func(msg whatsmeow.DownloadableMessage, f whatsmeow.File) error
	// chatPresence, when set, runs first in every SendChatPresence, outside
	// the lock, as a slow or failing network would.
	chatPresence func(ctx context.Context, jid types.JID, state types.ChatPresence) error
}

func newFakeWA() *fakeWA {
	return &fakeWA{
		paired:  true,
		pn:      botPN,
		lid:     botLID,
		lidToPN: map[types.JID]types.JID{aliceLID: alicePN},
		names:   map[types.JID]string{alicePN: "Alice Contact"},
	}
}

func (f *fakeWA) Paired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paired
}

func (f *fakeWA) OwnIDs() (types.JID, types.JID) { return f.pn, f.lid }

func (f *fakeWA) ConnectContext(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	if len(f.connectErrs) > 0 {
		err := f.connectErrs[0]
		f.connectErrs = f.connectErrs[1:]
		return err
	}
	return nil
}

func (f *fakeWA) connectCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

func (f *fakeWA) Disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disconnects++
}

func (f *fakeWA) SendMessage(_ context.Context, to types.JID, msg *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := ""
	if len(extra) == 1 {
		id = string(extra[0].ID)
	}
	f.sent = append(f.sent, sentMessage{to: to, text: msg.GetConversation(), id: id, msg: msg})
	if len(f.sendErrs) > 0 {
		err := f.sendErrs[0]
		f.sendErrs = f.sendErrs[1:]
		if err != nil {
			return whatsmeow.SendResponse{}, err
		}
	}
	return whatsmeow.SendResponse{ID: types.MessageID(id), Timestamp: time.Now()}, nil
}

// Upload records the file and answers like WhatsApp's media servers: the
// plaintext's hash and length, a made-up path, key and encrypted hash.
func (f *fakeWA) Upload(_ context.Context, plaintext []byte, appInfo whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploads = append(f.uploads, upload{data: append([]byte(nil), plaintext...), mediaType: appInfo})
	if len(f.uploadErrs) > 0 {
		err := f.uploadErrs[0]
		f.uploadErrs = f.uploadErrs[1:]
		if err != nil {
			return whatsmeow.UploadResponse{}, err
		}
	}
	sum := sha256.Sum256(plaintext)
	enc := sha256.Sum256(append([]byte("enc:"), plaintext...))
	n := len(f.uploads)
	return whatsmeow.UploadResponse{
		URL:           fmt.Sprintf("https://mmg.whatsapp.net/upload/%d", n),
		DirectPath:    fmt.Sprintf("/v/t62/upload-%d", n),
		MediaKey:      bytes.Repeat([]byte{byte(n)}, 32),
		FileEncSHA256: enc[:],
		FileSHA256:    sum[:],
		FileLength:    uint64(len(plaintext)),
	}, nil
}

func (f *fakeWA) uploaded() []upload {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]upload(nil), f.uploads...)
}

func (f *fakeWA) sentMessages() []sentMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentMessage(nil), f.sent...)
}

func (f *fakeWA) SendPresence(_ context.Context, state types.Presence) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.presences = append(f.presences, string(state))
	return nil
}

func (f *fakeWA) SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, _ types.ChatPresenceMedia) error {
	f.mu.Lock()
	hook := f.chatPresence
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, jid, state); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.presences = append(f.presences, string(state)+" "+jid.String())
	return nil
}

func (f *fakeWA) presenceLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.presences...)
}

func (f *fakeWA) GetJoinedGroups(context.Context) ([]*types.GroupInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groups, nil
}

func (f *fakeWA) DownloadToFile(_ context.Context, msg whatsmeow.DownloadableMessage, file whatsmeow.File) error {
	f.mu.Lock()
	f.downloads++
	fn := f.download
	f.mu.Unlock()
	if fn == nil {
		return errors.New("no download scripted")
	}
	return fn(msg, file)
}

func (f *fakeWA) downloadCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downloads
}

func (f *fakeWA) PNForLID(_ context.Context, lid types.JID) (types.JID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lidToPN[lid.ToNonAD()], nil
}

func (f *fakeWA) ContactName(_ context.Context, user types.JID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names[user]
}

// recorder collects what the channel hands to the rest of the daemon.
// recorder is a fake Sink. Like the ingest's Inbound, its Inbound writes
// the message's chat too: chats lists every chat write, from either method.
type recorder struct {
	mu         sync.Mutex
	messages   []channel.Message
	chats      []string // "chat|name|isGroup", one per chat write
	inboundErr error
	panics     bool // Inbound panics
	chatErr    error
	registered map[string]bool
	own        map[string]bool
}

var _ Sink = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{
		registered: map[string]bool{familyChat.String(): true, alicePN.String(): true},
		own:        map[string]bool{},
	}
}

func (r *recorder) Inbound(_ context.Context, _ ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.panics {
		panic("boom")
	}
	if r.inboundErr != nil {
		return 0, r.inboundErr
	}
	r.messages = append(r.messages, m)
	r.chats = append(r.chats, chatRow(m.Chat, m.ChatName, m.IsGroup))
	return bridgedstore.MessageID(len(r.messages)), nil
}

func (r *recorder) ChatSeen(_ context.Context, chat, name string, isGroup bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chatErr != nil {
		return r.chatErr
	}
	r.chats = append(r.chats, chatRow(chat, name, isGroup))
	return nil
}

func chatRow(chat, name string, isGroup bool) string {
	g := "dm"
	if isGroup {
		g = "group"
	}
	return chat + "|" + name + "|" + g
}

func (r *recorder) Lookup(_ context.Context, chat string) (ingest.Changed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ingest.Changed{Known: true, Registered: r.registered[chat]}, nil
}

func (r *recorder) IsOwnMessage(_ context.Context, chat, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.own[chat+"/"+id]
}

func (r *recorder) stored() []channel.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]channel.Message(nil), r.messages...)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.chats...)
}

type testClient struct {
	*Client
	wa   *fakeWA
	rec  *recorder
	logs *testlog.Buffer
	ver  *fakeVersion
}

type fakeVersion struct {
	mu      sync.Mutex
	current store.WAVersionContainer
	latest  store.WAVersionContainer
	fetches int
}

func (v *fakeVersion) versioner() *versioner {
	return &versioner{
		fetch: func(context.Context) (store.WAVersionContainer, error) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.fetches++
			if v.latest.IsZero() {
				return store.WAVersionContainer{}, errors.New("offline")
			}
			return v.latest, nil
		},
		apply: func(n store.WAVersionContainer) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.current = n
		},
		get: func() store.WAVersionContainer {
			v.mu.Lock()
			defer v.mu.Unlock()
			return v.current
		},
		log: zerolog.Nop(),
	}
}

// newTestClient builds a client around a fake whatsmeow. edit may change the
// options before they are validated.
func newTestClient(t *testing.T, edit func(*Options)) *testClient {
	t.Helper()
	wa := newFakeWA()
	rec := newRecorder()
	logs := &testlog.Buffer{}
	opts := Options{
		Sink:          rec,
		AssistantName: "Andy",
		Log:           zerolog.New(logs).Level(zerolog.DebugLevel),
	}
	if edit != nil {
		edit(&opts)
	}
	opts.validate()
	fv := &fakeVersion{current: store.WAVersionContainer{2, 3000, 1}}
	c := newClient(opts, wa, fv.versioner())
	t.Cleanup(func() { _ = c.Close() })
	return &testClient{Client: c, wa: wa, rec: rec, logs: logs, ver: fv}
}

// msgEvent builds the event whatsmeow would dispatch for raw.
func msgEvent(info types.MessageInfo, raw *waE2E.Message) *events.Message {
	if info.Timestamp.IsZero() {
		info.Timestamp = msgTime
	}
	return (&events.Message{Info: info, RawMessage: raw}).UnwrapRaw()
}

// groupInfo is a message from sender in the family group.
func groupInfo(id string, sender types.JID) types.MessageInfo {
	return types.MessageInfo{
		MessageSource: types.MessageSource{Chat: familyChat, Sender: sender, IsGroup: true},
		ID:            id,
		PushName:      "Alice",
	}
}
