// Package telegramtest is a fake Telegram Bot API on a loopback port, for
// the tests of the Telegram channel, the channel conformance suite and the
// end-to-end tests. It serves getMe, getUpdates (a long poll that honours
// the offset as Telegram does: an update below it is confirmed and
// forgotten), sendMessage, sendChatAction, answerCallbackQuery,
// getChatAdministrators and getWebhookInfo, records what the bot sent, and
// injects faults per method: an error answer (429 with retry_after, 409,
// 401, 403, 5xx), a hang (no answer until the client gives up, after the
// message was delivered for a sendMessage: an ambiguous send), and a
// duplicate (getUpdates answers each update twice).
package telegramtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Token is the bot token the server accepts.
const Token = "123456:TEST-token-of-the-fake-bot"

// BotID and BotName are the fake bot's user id and username.
const (
	BotID   int64 = 123456
	BotName       = "bridged_test_bot"
)

// Fault is what the server does instead of answering one call.
type Fault struct {
	Code        int    // an error answer with this code (429, 409, 401, 403, 500…)
	Description string // its description; empty: a default
	RetryAfter  int    // a 429's retry_after, in seconds
	MigrateTo   int64  // a 400's migrate_to_chat_id (a group became a supergroup)
	// Hang answers nothing until the client gives up (a timeout). A
	// sendMessage that hangs delivers its message first.
	Hang bool
	// Duplicate (getUpdates) answers each update twice.
	Duplicate bool
}

// Sent is a message the bot sent.
type Sent struct {
	ID       int
	Chat     int64
	Text     string
	Markup   string // the reply_markup as sent (JSON), "" when none
	ParseMod string
	// Method is sendMessage, sendPhoto or sendDocument; File and FileData
	// the uploaded file's name and content (Text is then the caption).
	Method   string
	File     string
	FileData []byte
}

// Server is the fake Bot API. Its methods are safe for concurrent use.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	privacy   bool          // the bot's privacy mode (can_read_all_group_messages false)
	longPoll  time.Duration // the most a getUpdates waits for an update
	updates   []update
	nextID    int64
	offset    int64 // the highest offset asked for
	polls     int
	sent      []Sent
	actions   []int64
	answered  []string
	faults    map[string][]Fault
	admins    map[int64][]int64
	files     map[string][]byte // file id → content
	msgID     int
	afterUpd  func() // called after each getUpdates answer that held updates
	onCall    func(method string, params map[string]string)
	changed   chan struct{} // closed and replaced when anything changes
	closing   chan struct{}
	closeOnce sync.Once
}

type update struct {
	id  int64
	raw map[string]any
}

// New starts a fake Bot API; it is closed when the test ends.
func New(t interface{ Cleanup(func()) }) *Server {
	s := &Server{nextID: 1000, faults: map[string][]Fault{}, admins: map[int64][]int64{}, files: map[string][]byte{}, msgID: 5000, longPoll: 2 * time.Second,
		changed: make(chan struct{}), closing: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Close stops the server; hanging calls end.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.Server.CloseClientConnections()
	s.Server.Close()
}

// SetPrivacy sets the bot's privacy mode as getMe reports it.
func (s *Server) SetPrivacy(on bool) {
	s.mu.Lock()
	s.privacy = on
	s.mu.Unlock()
}

// SetLongPoll sets the most a getUpdates waits for an update (2 s at
// first, so that a test's client stops quickly; Telegram waits the
// timeout asked for).
func (s *Server) SetLongPoll(d time.Duration) {
	s.mu.Lock()
	s.longPoll = d
	s.mu.Unlock()
}

// SetAdmins sets a group's admins as getChatAdministrators reports them.
func (s *Server) SetAdmins(chat int64, users ...int64) {
	s.mu.Lock()
	s.admins[chat] = users
	s.mu.Unlock()
}

// AfterUpdates has fn called (on the server's goroutine) after each
// getUpdates answer that held updates was written: the moment between a
// poll and its commit. nil removes it.
func (s *Server) AfterUpdates(fn func()) {
	s.mu.Lock()
	s.afterUpd = fn
	s.mu.Unlock()
}

// OnCall has fn called with each call's method and parameters as the
// call arrives, before it is served. nil removes it.
func (s *Server) OnCall(fn func(method string, params map[string]string)) {
	s.mu.Lock()
	s.onCall = fn
	s.mu.Unlock()
}

// Inject queues f for the next call of method.
func (s *Server) Inject(method string, f Fault) {
	s.mu.Lock()
	s.faults[method] = append(s.faults[method], f)
	s.mu.Unlock()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Update queues a raw update (its update_id is set) and returns its id.
func (s *Server) Update(raw map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	raw["update_id"] = s.nextID
	s.updates = append(s.updates, update{id: s.nextID, raw: raw})
	s.notify()
	return s.nextID
}

// User is a Telegram user in an update.
type User struct {
	ID   int64
	Name string
}

func (u User) raw() map[string]any {
	return map[string]any{"id": u.ID, "is_bot": u.ID == BotID, "first_name": u.Name, "username": strings.ToLower(u.Name)}
}

// Chat is a Telegram chat in an update: a negative id is a supergroup.
type Chat struct {
	ID    int64
	Title string
}

func (c Chat) raw() map[string]any {
	if c.ID < 0 {
		return map[string]any{"id": c.ID, "type": "supergroup", "title": c.Title}
	}
	return map[string]any{"id": c.ID, "type": "private", "first_name": c.Title}
}

// Entity is a message entity (offsets in UTF-16 code units).
type Entity struct {
	Type           string
	Offset, Length int
	URL            string
	UserID         int64
}

// File is a file a message carries: Kind "photo", "document", "voice" or
// "audio". Data is served for download (getFile); Size, when set, is the
// size announced instead of len(Data).
type File struct {
	Kind, ID, Name, MIME string
	Data                 []byte
	Size                 int64
}

// Msg is a message to deliver.
type Msg struct {
	// File, when set, is carried by the message; Text is then its caption.
	File     *File
	Chat     Chat
	From     User
	Text     string
	Entities []Entity
	ReplyTo  int // the id of a message this one answers
	// ReplyToBot marks the answered message as the bot's.
	ReplyToBot bool
	Date       time.Time
}

// Message queues a message update and returns its update id and message id.
func (s *Server) Message(m Msg) (updateID int64, messageID int) {
	s.mu.Lock()
	s.msgID++
	id := s.msgID
	s.mu.Unlock()
	if m.Date.IsZero() {
		m.Date = time.Now()
	}
	msg := map[string]any{"message_id": id, "date": m.Date.Unix(), "chat": m.Chat.raw(), "from": m.From.raw(), "text": m.Text}
	if f := m.File; f != nil {
		size := f.Size
		if size == 0 {
			size = int64(len(f.Data))
		}
		s.mu.Lock()
		s.files[f.ID] = f.Data
		s.mu.Unlock()
		delete(msg, "text")
		if m.Text != "" {
			msg["caption"] = m.Text
		}
		fm := map[string]any{"file_id": f.ID, "file_unique_id": "u" + f.ID, "file_size": size}
		switch f.Kind {
		case "photo":
			msg["photo"] = []map[string]any{{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10}, fm}
		case "voice":
			fm["duration"], fm["mime_type"] = 3, "audio/ogg"
			msg["voice"] = fm
		default:
			fm["file_name"], fm["mime_type"] = f.Name, f.MIME
			msg[f.Kind] = fm
		}
	}
	var ents []map[string]any
	for _, e := range m.Entities {
		r := map[string]any{"type": e.Type, "offset": e.Offset, "length": e.Length}
		if e.URL != "" {
			r["url"] = e.URL
		}
		if e.UserID != 0 {
			r["user"] = User{ID: e.UserID, Name: "u"}.raw()
		}
		ents = append(ents, r)
	}
	if ents != nil {
		msg["entities"] = ents
	}
	if m.ReplyTo != 0 {
		from := User{ID: 42, Name: "someone"}
		if m.ReplyToBot {
			from = User{ID: BotID, Name: BotName}
		}
		msg["reply_to_message"] = map[string]any{"message_id": m.ReplyTo, "date": m.Date.Unix(), "chat": m.Chat.raw(), "from": from.raw(), "text": "earlier"}
	}
	return s.Update(map[string]any{"message": msg}), id
}

// Press queues a button press by from on the bot's message msgID in chat
// with data, and returns its update id.
func (s *Server) Press(chat Chat, from User, msgID int, data string) int64 {
	return s.Update(map[string]any{"callback_query": map[string]any{
		"id": fmt.Sprintf("cb%d", msgID) + strconv.FormatInt(from.ID, 10), "from": from.raw(), "chat_instance": "x", "data": data,
		"message": map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": chat.raw(), "from": User{ID: BotID, Name: BotName}.raw(), "text": "request"},
	}})
}

// React queues from's reaction with emoji to message msgID of chat.
func (s *Server) React(chat Chat, from User, msgID int, emoji string) int64 {
	return s.Update(map[string]any{"message_reaction": map[string]any{
		"chat": chat.raw(), "message_id": msgID, "user": from.raw(), "date": time.Now().Unix(),
		"old_reaction": []any{}, "new_reaction": []any{map[string]any{"type": "emoji", "emoji": emoji}},
	}})
}

// Added queues the bot's being added to chat (my_chat_member).
func (s *Server) Added(chat Chat, by User) int64 {
	return s.Update(map[string]any{"my_chat_member": map[string]any{
		"chat": chat.raw(), "from": by.raw(), "date": time.Now().Unix(),
		"old_chat_member": map[string]any{"status": "left", "user": User{ID: BotID, Name: BotName}.raw()},
		"new_chat_member": map[string]any{"status": "member", "user": User{ID: BotID, Name: BotName}.raw()},
	}})
}

// Sent returns the messages the bot sent, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Actions returns the chats of every sendChatAction, in order.
func (s *Server) Actions() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.actions...)
}

// Answered returns the ids of the button presses answered.
func (s *Server) Answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answered...)
}

// Offset returns the highest offset a getUpdates asked for: every update
// below it is confirmed to Telegram.
func (s *Server) Offset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset
}

// Polls counts the getUpdates calls.
func (s *Server) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// WaitFor waits until cond (called under no lock) holds or d passes, and
// reports whether it held. The server wakes it on every call it serves.
func (s *Server) WaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return cond()
		}
	}
}

// params reads a call's parameters: JSON, a multipart form or a URL form.
func params(r *http.Request) map[string]string {
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			} else {
				j, _ := json.Marshal(v)
				out[k] = string(j)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(8 << 20); err == nil {
			for k, v := range r.MultipartForm.Value {
				out[k] = v[0]
			}
		}
	default:
		_ = r.ParseForm()
		for k, v := range r.Form {
			out[k] = v[0]
		}
	}
	return out
}

func write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, f Fault) {
	desc := f.Description
	if desc == "" {
		desc = http.StatusText(f.Code)
	}
	body := map[string]any{"ok": false, "error_code": f.Code, "description": desc}
	switch {
	case f.RetryAfter > 0:
		body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
	case f.MigrateTo != 0:
		body["parameters"] = map[string]any{"migrate_to_chat_id": f.MigrateTo}
	}
	write(w, f.Code, body)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+Token+"/files/"); ok {
		s.mu.Lock()
		data, found := s.files[id]
		s.mu.Unlock()
		if !found {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot"+Token+"/")
	if !ok {
		fail(w, Fault{Code: 401, Description: "Unauthorized"})
		return
	}
	method := rest
	p := params(r)
	s.mu.Lock()
	if fn := s.onCall; fn != nil {
		s.mu.Unlock()
		fn(method, p)
		s.mu.Lock()
	}
	var f *Fault
	if q := s.faults[method]; len(q) > 0 {
		f = &q[0]
		s.faults[method] = q[1:]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.notify()
		s.mu.Unlock()
	}()
	if f != nil && f.Code != 0 {
		if method == "getUpdates" {
			s.mu.Lock()
			s.polls++
			s.mu.Unlock()
		}
		fail(w, *f)
		return
	}
	hang := f != nil && f.Hang
	switch method {
	case "getMe":
		s.mu.Lock()
		priv := s.privacy
		s.mu.Unlock()
		write(w, 200, map[string]any{"ok": true, "result": map[string]any{"id": BotID, "is_bot": true, "first_name": "Andy", "username": BotName,
			"can_join_groups": true, "can_read_all_group_messages": !priv}})
	case "getFile":
		s.mu.Lock()
		data, found := s.files[p["file_id"]]
		s.mu.Unlock()
		if !found {
			fail(w, Fault{Code: 400, Description: "Bad Request: invalid file_id"})
			return
		}
		write(w, 200, map[string]any{"ok": true, "result": map[string]any{"file_id": p["file_id"], "file_unique_id": "u" + p["file_id"],
			"file_size": len(data), "file_path": "files/" + p["file_id"]}})
	case "getWebhookInfo":
		write(w, 200, map[string]any{"ok": true, "result": map[string]any{"url": "", "pending_update_count": 0}})
	case "getUpdates":
		s.getUpdates(w, r, p, hang, f != nil && f.Duplicate)
	case "sendMessage", "sendPhoto", "sendDocument":
		chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
		m := Sent{Chat: chat, Text: p["text"], Markup: p["reply_markup"], ParseMod: p["parse_mode"], Method: method}
		if method != "sendMessage" {
			m.Text = p["caption"]
			field := map[string]string{"sendPhoto": "photo", "sendDocument": "document"}[method]
			if r.MultipartForm != nil && len(r.MultipartForm.File[field]) == 1 {
				fh := r.MultipartForm.File[field][0]
				m.File = fh.Filename
				if f, err := fh.Open(); err == nil {
					m.FileData, _ = io.ReadAll(f)
					f.Close()
				}
			}
		}
		s.mu.Lock()
		s.msgID++
		m.ID = s.msgID
		s.sent = append(s.sent, m)
		s.notify()
		s.mu.Unlock()
		if hang {
			s.hang(r)
			return
		}
		write(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": m.ID, "date": time.Now().Unix(),
			"chat": Chat{ID: chat}.raw(), "from": User{ID: BotID, Name: BotName}.raw(), "text": m.Text}})
	case "sendChatAction":
		chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
		s.mu.Lock()
		s.actions = append(s.actions, chat)
		s.mu.Unlock()
		write(w, 200, map[string]any{"ok": true, "result": true})
	case "answerCallbackQuery":
		s.mu.Lock()
		s.answered = append(s.answered, p["callback_query_id"])
		s.mu.Unlock()
		write(w, 200, map[string]any{"ok": true, "result": true})
	case "getChatAdministrators":
		chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
		s.mu.Lock()
		ids := s.admins[chat]
		s.mu.Unlock()
		var out []map[string]any
		for _, id := range ids {
			out = append(out, map[string]any{"status": "administrator", "user": User{ID: id, Name: "admin"}.raw()})
		}
		write(w, 200, map[string]any{"ok": true, "result": append([]map[string]any{}, out...)})
	default:
		fail(w, Fault{Code: 404, Description: "Not Found: method " + method})
	}
}

// hang answers nothing until the client gives up or the server closes.
func (s *Server) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// getUpdates confirms the updates below the offset (forgets them) and
// answers those from it on, waiting up to the timeout (at most the long
// poll set) for one.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string, hang, dup bool) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	s.mu.Lock()
	wait := min(time.Duration(timeout)*time.Second, s.longPoll)
	s.polls++
	if offset > s.offset {
		s.offset = offset
	}
	keep := s.updates[:0]
	for _, u := range s.updates {
		if u.id >= offset {
			keep = append(keep, u)
		}
	}
	s.updates = keep
	s.mu.Unlock()
	if hang {
		s.hang(r)
		return
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var out []map[string]any
		for _, u := range s.updates {
			if u.id >= offset {
				out = append(out, u.raw)
				if dup {
					out = append(out, u.raw)
				}
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 {
			write(w, 200, map[string]any{"ok": true, "result": out})
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			s.mu.Lock()
			fn := s.afterUpd
			s.mu.Unlock()
			if fn != nil {
				fn()
			}
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			write(w, 200, map[string]any{"ok": true, "result": []any{}})
			return
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}
