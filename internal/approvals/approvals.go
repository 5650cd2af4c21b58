// Package approvals turns the tool calls a group's profile sends to the
// owner into approval requests in the main chat, and settles each once:
// by the owner (the command line, the control API, a reply, a quote or a
// reaction in the main chat), by the timeout, or, for a request left open
// when bridged stopped, as denied at the next start.
//
// A decision is committed (an UPDATE of an open row) before the waiting
// runner hears it, so an answer applies once, to that request only; a
// duplicated reply or reaction finds the request settled and changes
// nothing.
package approvals

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// DefaultTimeout is how long a request waits for the owner before it is
// denied (BRIDGED_APPROVAL_TIMEOUT).
const DefaultTimeout = 10 * time.Minute

// Poster commits a message to a chat's outbox and wakes its sender.
type Poster interface {
	SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
}

// MaxOpenPerGroup is the most approval requests one group may have open at
// once: the next is refused at once (ErrTooMany), and the runner denies
// that tool call with the refusal's words. An agent that asks faster than
// the owner answers fills the cap, not the owner's chat.
const MaxOpenPerGroup = 3

// Errors of Ask.
var (
	// ErrTooMany: the group has MaxOpenPerGroup requests open already.
	ErrTooMany = fmt.Errorf("%w: %d approval requests of this group are open already; ask again once the owner answered one", ipc.ErrApprovalRefused, MaxOpenPerGroup)
	// ErrBadTool: the tool's name is not an identifier (ipc.ValidToolName).
	ErrBadTool = fmt.Errorf("%w: the tool's name is not an identifier", ipc.ErrApprovalRefused)
)

// Errors of Decide.
var (
	// ErrSettled: the request was decided before; nothing changed.
	ErrSettled = errors.New("approval request already settled")
	// ErrNotFound: no request has that id.
	ErrNotFound = store.ErrNotFound
)

// Service is the approvals. Create it with New.
type Service struct {
	db      *store.DB
	timeout time.Duration
	log     zerolog.Logger

	poster Poster // built before the router: it commits to the outbox

	mu      sync.Mutex
	waiters map[string]chan store.Approval // open requests a runner waits for
	changed chan struct{}                  // closed (and replaced) when a request opens or is settled

	waits *waits // the tool calls the live containers announced
}

// New returns the approvals of db, posting requests and notices through
// poster; timeout 0 means DefaultTimeout.
func New(db *store.DB, poster Poster, timeout time.Duration, log zerolog.Logger) *Service {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Service{db: db, poster: poster, timeout: timeout, log: log.With().Str("component", "approvals").Logger(),
		waiters: map[string]chan store.Approval{}, changed: make(chan struct{}), waits: newWaits()}
}

// Changed returns a channel that is closed when a request next opens or is
// settled: a caller that takes it before reading the requests misses no
// change. It never blocks.
func (s *Service) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// changedNow wakes the callers of Changed.
func (s *Service) changedNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}

// Timeout is how long a request waits for the owner.
func (s *Service) Timeout() time.Duration { return s.timeout }

// post tells the main chat text; failures are logged.
func (s *Service) post(ctx context.Context, text string) (store.OutboxItem, error) {
	p := s.poster
	if p == nil {
		return store.OutboxItem{}, errors.New("no poster")
	}
	main, err := s.db.Groups.Main(ctx)
	if err != nil {
		return store.OutboxItem{}, fmt.Errorf("no main chat to ask: %w", err)
	}
	return p.SendMessage(ctx, string(main.Chat), text, store.OriginNotice, "")
}

// Ask asks the owner about one tool call of folder's agent and blocks
// until it is settled: allowed by a standing rule at once, else posted to
// the main chat and decided by the owner or denied at the timeout. When
// ctx ends first (the daemon stops), the request stays open and is settled
// as denied at the next start (SettleOpen); Ask returns ctx's error.
//
// Past MaxOpenPerGroup open requests of folder, Ask returns ErrTooMany at
// once; a tool name that is not an identifier, ErrBadTool.
func (s *Service) Ask(ctx context.Context, folder, requestID string, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error) {
	if !ipc.ValidToolName(args.Tool) {
		return ipc.ApprovalDecision{}, ErrBadTool
	}
	subject := Subject(args.Tool, args.Input)
	rule := Rule(args.Tool, args.Input)
	log := s.log.With().Str("group", folder).Str("tool", args.Tool).Logger()
	if ok, err := s.db.Approvals.HasRule(ctx, store.Folder(folder), rule); err != nil {
		return ipc.ApprovalDecision{}, err
	} else if ok {
		log.Info().Str("rule", rule).Msg("tool call allowed by a standing rule")
		return ipc.ApprovalDecision{Allow: true}, nil
	}
	var a store.Approval
	for try := 0; ; try++ {
		var err error
		a, err = addApproval(ctx, s.db, store.Approval{ID: newID(), Folder: store.Folder(folder), RequestID: requestID,
			Tool: args.Tool, Subject: subject, Rule: rule})
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrExists) || try >= 5 {
			return ipc.ApprovalDecision{}, err
		}
	}
	ch := make(chan store.Approval, 1)
	s.mu.Lock()
	s.waiters[a.ID] = ch
	s.mu.Unlock()
	s.changedNow()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, a.ID)
		s.mu.Unlock()
	}()
	log = log.With().Str("approval", a.ID).Logger()
	item, err := s.post(ctx, RequestText(a, s.timeout))
	if err != nil {
		log.Warn().Err(err).Msg("approval request not posted; denied")
		d, _ := s.settle(ctx, a.ID, false, false, "unasked")
		return decision(d, "not approved: the owner could not be asked"), nil
	}
	if err := s.db.Tx(ctx, func(tx *store.Tx) error { return tx.Approvals.SetOutbox(ctx, a.ID, item.ID) }); err != nil {
		log.Warn().Err(err).Msg("approval request's message not recorded (a quote or reaction will not find it)")
	}
	log.Info().Str("subject", subject).Msg("approval requested")

	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case d := <-ch:
		return decision(d, ""), nil
	case <-timer.C:
		d, err := s.settle(context.WithoutCancel(ctx), a.ID, false, false, "timeout")
		if err != nil && !errors.Is(err, ErrSettled) {
			return ipc.ApprovalDecision{}, err
		}
		if errors.Is(err, ErrSettled) {
			return decision(d, ""), nil
		}
		s.notice(ctx, fmt.Sprintf("Approval %s (%s, %s) was not answered within %s: denied.", a.ID, a.Folder, a.Tool, short(s.timeout)))
		return decision(d, fmt.Sprintf("not approved: the owner did not answer within %s", short(s.timeout))), nil
	case <-ctx.Done():
		return ipc.ApprovalDecision{}, ctx.Err()
	}
}

// addApproval stores a as open unless its group has MaxOpenPerGroup open
// already (ErrTooMany), counted in the same transaction.
func addApproval(ctx context.Context, db *store.DB, a store.Approval) (store.Approval, error) {
	var out store.Approval
	err := db.Tx(ctx, func(tx *store.Tx) error {
		n, err := tx.Approvals.CountOpen(ctx, a.Folder)
		if err != nil {
			return err
		}
		if n >= MaxOpenPerGroup {
			return ErrTooMany
		}
		out, err = tx.Approvals.Add(ctx, a)
		return err
	})
	return out, err
}

// Announce records that folder's live container waits on the tool call
// (toolUseID, tool): its runner said so on its stdout (an approval_wait
// line) before writing the ask_approval request that Claim takes.
func (s *Service) Announce(folder, toolUseID, tool string) {
	if !s.waits.announce(folder, toolUseID, tool) {
		s.log.Warn().Str("group", folder).Int("max", maxAnnounced).Msg("approval announcement dropped: too many unclaimed")
	}
}

// Claim takes folder's announcement of (toolUseID, tool), waiting up to
// AnnounceWait for it to arrive, and reports whether there was one. Each
// announcement is claimed once.
func (s *Service) Claim(ctx context.Context, folder, toolUseID, tool string) bool {
	return s.waits.claim(ctx, folder, toolUseID, tool, AnnounceWait)
}

// decision is what the runner is told of a settled request.
func decision(a store.Approval, msg string) ipc.ApprovalDecision {
	d := ipc.ApprovalDecision{Allow: a.State == store.ApprovalAllowed, ID: a.ID, Message: msg}
	if !d.Allow && d.Message == "" {
		d.Message = "not approved by the owner"
		if a.DecidedBy == "timeout" {
			d.Message = "not approved: the owner did not answer in time"
		}
	}
	return d
}

// Decide settles the open request id: allow or deny, with always adding
// the request's rule to its group's standing rules (allow only). by says
// who decided ("cli", "chat", "reaction", ...). ErrNotFound for an unknown
// id, ErrSettled (with the request as it stands) when it was settled
// before. The decision is committed before the waiting runner hears it.
func (s *Service) Decide(ctx context.Context, id string, allow, always bool, by string) (store.Approval, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	a, err := s.settle(ctx, id, allow, always, by)
	if err != nil {
		return a, err
	}
	verb := "denied"
	if allow {
		verb = "allowed"
		if always {
			verb = "allowed, and from now on without asking"
		}
	}
	s.notice(ctx, fmt.Sprintf("Approval %s (%s, %s): %s.", a.ID, a.Folder, a.Tool, verb))
	return a, nil
}

// settle commits the decision and hands it to the waiting Ask, if any.
func (s *Service) settle(ctx context.Context, id string, allow, always bool, by string) (store.Approval, error) {
	var a store.Approval
	var changed bool
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if a, err = tx.Approvals.Get(ctx, id); err != nil {
			return err
		}
		if changed, err = tx.Approvals.Decide(ctx, id, allow, always, by); err != nil || !changed {
			return err
		}
		if allow && always {
			if err := tx.Approvals.AddRule(ctx, a.Folder, a.Rule, by); err != nil {
				return err
			}
		}
		a, err = tx.Approvals.Get(ctx, id)
		return err
	})
	if err != nil {
		return store.Approval{}, err
	}
	if !changed {
		return a, fmt.Errorf("approval %s: %w (%s by %s)", id, ErrSettled, a.State, a.DecidedBy)
	}
	s.log.Info().Str("approval", a.ID).Str("group", string(a.Folder)).Str("state", string(a.State)).
		Str("by", by).Bool("always", a.Always).Msg("approval settled")
	s.changedNow()
	s.mu.Lock()
	ch := s.waiters[a.ID]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
	return a, nil
}

func (s *Service) notice(ctx context.Context, text string) {
	if _, err := s.post(context.WithoutCancel(ctx), text); err != nil {
		s.log.Warn().Err(err).Msg("approval notice not posted")
	}
}

// SettleOpen denies every request left open by a bridged that stopped
// (call it once at start, before any container runs), with one notice each
// in the main chat. It returns how many it settled.
func (s *Service) SettleOpen(ctx context.Context) (int, error) {
	open, err := s.db.Approvals.List(ctx, true, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range open {
		if _, err := s.settle(ctx, a.ID, false, false, "restart"); err != nil {
			if errors.Is(err, ErrSettled) {
				continue
			}
			return n, err
		}
		n++
		s.notice(ctx, fmt.Sprintf("Approval %s (%s, %s) was open when bridged stopped: denied. The cut-off turn runs again and asks anew if it still needs it.", a.ID, a.Folder, a.Tool))
	}
	return n, nil
}

// ContainerGone denies the requests of folder still open when its container
// is gone (it crashed, timed out or was stopped): no runner waits for them
// any more. Each gets one notice in the main chat.
func (s *Service) ContainerGone(ctx context.Context, folder string) {
	s.waits.forget(folder)
	ctx = context.WithoutCancel(ctx)
	open, err := s.db.Approvals.List(ctx, true, 0)
	if err != nil {
		s.log.Error().Err(err).Str("group", folder).Msg("list open approvals")
		return
	}
	for _, a := range open {
		if string(a.Folder) != folder {
			continue
		}
		if _, err := s.settle(ctx, a.ID, false, false, "container ended"); err != nil {
			continue // settled meanwhile
		}
		s.notice(ctx, fmt.Sprintf("Approval %s (%s, %s) was open when its container ended: denied.", a.ID, a.Folder, a.Tool))
	}
}

// List returns up to limit requests, newest first (0: all); openOnly keeps
// the open ones.
func (s *Service) List(ctx context.Context, openOnly bool, limit int) ([]store.Approval, error) {
	return s.db.Approvals.List(ctx, openOnly, limit)
}

// Rules lists the standing rules.
func (s *Service) Rules(ctx context.Context) ([]store.ApprovalRule, error) {
	return s.db.Approvals.Rules(ctx)
}

// Forget removes the standing rule id.
func (s *Service) Forget(ctx context.Context, id int64) error {
	return s.db.Approvals.RemoveRule(ctx, id)
}

// Answer takes an approval answer out of the inbound message m: it reports
// true when m must not be stored (it answered a request, or it is a
// reaction, which is never a prompt). Only the owner's own messages in the
// main chat answer (FromMe and not IsBot): `yes ID` / `no ID`, a reply
// quoting the request (yes/no, 👍/👎), or a 👍/👎 reaction to it. Anyone
// else's reply is an ordinary message; anyone's reaction is dropped.
func (s *Service) Answer(ctx context.Context, m channel.Message) bool {
	if !m.FromMe || m.IsBot {
		// Not the owner: never an answer; a reaction is still dropped.
		return m.Reaction != nil
	}
	main, err := s.db.Groups.Main(ctx)
	isMain := err == nil && string(main.Chat) == m.Chat
	ans, ok := Parse(m, isMain)
	if !ok {
		return m.Reaction != nil
	}
	var a store.Approval
	if ans.ID != "" {
		a, err = s.db.Approvals.Get(ctx, ans.ID)
	} else {
		a, err = s.bySentID(ctx, ans.Target)
	}
	if err != nil {
		// Not about a request bridged knows: an ordinary message.
		return m.Reaction != nil
	}
	if _, err := s.Decide(ctx, a.ID, ans.Allow, false, ans.By); err != nil {
		s.log.Info().Err(err).Str("approval", a.ID).Str("by", ans.By).Msg("approval answer changed nothing")
	}
	return true
}

// requestRE reads a request's id from its message (RequestText).
var requestRE = regexp.MustCompile(`^Approval ([a-z0-9]{4}): group `)

// RequestIDOf returns the id of the request whose message (RequestText) is
// text, and whether text is one.
func RequestIDOf(text string) (string, bool) {
	g := requestRE.FindStringSubmatch(text)
	if g == nil || !validID(g[1]) {
		return "", false
	}
	return g[1], true
}

// bySentID finds the request whose message was sent with the network id
// sent: through the message recorded with it, or, when the answer came
// before that record (a quick reaction), through the message's text.
func (s *Service) bySentID(ctx context.Context, sent string) (store.Approval, error) {
	a, err := s.db.Approvals.BySentID(ctx, sent)
	if !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	text, err := s.db.Notices.BySentID(ctx, sent)
	if err != nil {
		return store.Approval{}, err
	}
	g := requestRE.FindStringSubmatch(text)
	if g == nil {
		return store.Approval{}, fmt.Errorf("message %s: %w", sent, store.ErrNotFound)
	}
	return s.db.Approvals.Get(ctx, g[1])
}

// Reply is an approval answer read from a message.
type Reply struct {
	ID     string // the request's short id, when the text names it
	Target string // the network id of the quoted or reacted-to message
	Allow  bool
	By     string // chat, quote or reaction
}

// Parse reads an approval answer from m, a message of the main chat when
// isMain. Only the owner's own messages (FromMe, not IsBot) in the main
// chat count.
func Parse(m channel.Message, isMain bool) (Reply, bool) {
	if !isMain || !m.FromMe || m.IsBot {
		return Reply{}, false
	}
	if r := m.Reaction; r != nil {
		allow, ok := yesNo(r.Emoji)
		if !ok || r.TargetID == "" {
			return Reply{}, false
		}
		return Reply{Target: r.TargetID, Allow: allow, By: "reaction"}, true
	}
	words := strings.Fields(strings.ToLower(m.OwnText()))
	if len(words) == 0 || len(words) > 2 {
		return Reply{}, false
	}
	allow, ok := yesNo(words[0])
	if !ok {
		return Reply{}, false
	}
	if len(words) == 2 {
		if !validID(words[1]) {
			return Reply{}, false
		}
		return Reply{ID: words[1], Allow: allow, By: "chat"}, true
	}
	if m.QuotedID == "" {
		return Reply{}, false
	}
	return Reply{Target: m.QuotedID, Allow: allow, By: "quote"}, true
}

func yesNo(w string) (allow, ok bool) {
	w = strings.TrimRight(w, ".!")
	switch w {
	case "yes", "y", "ok", "approve", "allow", "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿":
		return true, true
	case "no", "n", "deny", "👎", "👎🏻", "👎🏼", "👎🏽", "👎🏾", "👎🏿":
		return false, true
	}
	return false, false
}

// idAlphabet has no look-alike letters.
const idAlphabet = "abcdefghjkmnpqrstuvwxyz23456789"

// IDLen is the length of a request's short id.
const IDLen = 4

func newID() string {
	var b [IDLen]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b[:])
}

func validID(s string) bool {
	if len(s) != IDLen {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune(idAlphabet, r) {
			return false
		}
	}
	return true
}

// MaxSubject is the longest subject shown, in runes.
const MaxSubject = 300

// Subject is what a tool call is about, as shown to the owner: a Bash
// command, a file path, a URL, or the input itself; on one line, trimmed
// to MaxSubject runes.
func Subject(tool string, input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { v, _ := in[k].(string); return v }
	var s string
	switch tool {
	case "Bash":
		s = str("command")
	case "Write", "Edit", "MultiEdit", "Read":
		s = str("file_path")
	case "NotebookEdit":
		s = str("notebook_path")
	case "WebFetch":
		s = str("url")
	}
	if s == "" {
		s = string(input)
	}
	return clean(s)
}

// Rule is what an approval with always allows from then on: the same tool
// with the same command or path; for WebFetch, the same host.
func Rule(tool string, input json.RawMessage) string {
	if tool == "WebFetch" {
		var in struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(input, &in) == nil {
			if u, err := url.Parse(in.URL); err == nil && u.Host != "" {
				return "WebFetch(domain:" + strings.ToLower(u.Hostname()) + ")"
			}
		}
	}
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { v, _ := in[k].(string); return v }
	s := ""
	switch tool {
	case "Bash":
		s = str("command")
	case "Write", "Edit", "MultiEdit":
		s = str("file_path")
	case "NotebookEdit":
		s = str("notebook_path")
	}
	if s == "" {
		b, _ := json.Marshal(in)
		s = string(b)
	}
	return tool + "(" + escape(s) + ")"
}

// escape writes the characters of s that a terminal or a chat would act
// on (controls, format characters such as bidi overrides) as \u{…}, and a
// backslash as \\: a rule is safe to show and still names one command
// exactly. s comes through encoding/json, which has made invalid UTF-8
// U+FFFD already.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clean puts s on one line without control characters or backticks, cut
// to MaxSubject runes.
func clean(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range strings.TrimSpace(s) {
		if n == MaxSubject {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n':
			b.WriteString(" ⏎ ")
		case r == '`':
			b.WriteRune('\'')
		case unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r):
			b.WriteRune('?')
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

// RequestText is the request's message in the main chat.
func RequestText(a store.Approval, timeout time.Duration) string {
	what := "run"
	switch a.Tool {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
		what = "write"
	case "WebFetch":
		what = "fetch"
	}
	return fmt.Sprintf("Approval %s: group %s wants to %s (%s):\n```%s```\nAnswer `yes %s` or `no %s` (or reply to this message, or react 👍/👎); in a terminal `bridged approve %s [--always]` or `bridged deny %s`. Without an answer it is denied in %s.",
		a.ID, a.Folder, what, a.Tool, a.Subject, a.ID, a.ID, a.ID, a.ID, short(timeout))
}

// short prints d without zero units ("10m", "1h30m", "45s").
func short(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
