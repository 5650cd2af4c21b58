package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// Story is one message's life, as `bridged why` tells it: told from what is
// stored, so it reads the same from a running daemon and from the files.
type Story struct {
	Message StoryMessage `json:"message"`
	Group   string       `json:"group,omitempty"` // its folder; empty: no group now
	// Woke says whether the message woke the agent; Why says why (not).
	Woke bool   `json:"woke"`
	Why  string `json:"why"`
	// Steps in order; a step whose time is not recorded has no At.
	Steps []StoryStep `json:"steps"`
}

// StoryMessage is the message a Story tells.
type StoryMessage struct {
	ID         int64      `json:"id"`
	Chat       string     `json:"chat"`
	Channel    string     `json:"channel,omitempty"`
	ExternalID string     `json:"external_id"`
	Sender     string     `json:"sender"`
	SenderName string     `json:"sender_name,omitempty"`
	Text       string     `json:"text"`
	SentAt     time.Time  `json:"sent_at"`
	StoredAt   *time.Time `json:"stored_at,omitempty"` // nil: not recorded
	Late       bool       `json:"late,omitempty"`
	Mentioned  bool       `json:"mentioned,omitempty"`
}

// StoryStep is one step of a message's life.
type StoryStep struct {
	// Step: received, stored, trigger, budget, handed, approval, turn,
	// cost, reply, notice. The budget's steps are its decisions as
	// recorded when they were made.
	Step string     `json:"step"`
	At   *time.Time `json:"at,omitempty"` // nil: not recorded
	// SinceMS is the time from the message's arrival (stored, else sent) to
	// At, in milliseconds.
	SinceMS int64  `json:"since_ms,omitempty"`
	Detail  string `json:"detail"`
	// State is the outcome where a step has one: matched, not_matched,
	// paused, refused, waiting, allowed, denied, done, failed, gave_up, sent,
	// pending; for changes: changed, unchanged, running.
	State string `json:"state,omitempty"`
	// Turn is the recorded change a changes step tells (`bridged diff
	// GROUP TURN`).
	Turn int64 `json:"turn,omitempty"`
}

// storyRows caps the turn ends and outbox rows one story reads.
const storyRows = 50

// storyLive tells message ref's life: ref is a message id, or "last" (or
// empty) for the newest message not sent by bridged, of chat when chat is
// set (a chat id or a group's folder), else of any chat. live is the
// daemon's live state (nil: stopped).
func (a *Admin) storyLive(ctx context.Context, ref, chat string, live *Live) (Story, error) {
	var chatID store.ChatID
	if chat != "" {
		if g, err := a.DB.Groups.ByFolder(ctx, store.Folder(chat)); err == nil {
			chatID = g.Chat
		} else if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalidFolder) {
			return Story{}, err
		} else {
			chatID = store.ChatID(chat)
		}
	}
	var m store.StoredMessage
	var err error
	switch ref = strings.TrimSpace(ref); ref {
	case "", "last":
		m, err = a.DB.Messages.LastFrom(ctx, chatID)
		if errors.Is(err, store.ErrNotFound) {
			if chat != "" {
				return Story{}, fmt.Errorf("no message from anyone is stored for chat %s: %w", chat, store.ErrNotFound)
			}
			return Story{}, fmt.Errorf("no message from anyone is stored: %w", store.ErrNotFound)
		}
	default:
		id, perr := strconv.ParseInt(ref, 10, 64)
		if perr != nil || id <= 0 {
			return Story{}, invalid("message %q: want a message id (a whole number) or last", ref)
		}
		m, err = a.DB.Messages.GetStored(ctx, store.MessageID(id))
		if errors.Is(err, store.ErrNotFound) {
			return Story{}, fmt.Errorf("message %d is not stored (never, or pruned by the retention): %w", id, store.ErrNotFound)
		}
		if err == nil && chatID != "" && m.Chat != chatID {
			return Story{}, invalid("message %d is of chat %s, not %s", id, m.Chat, chat)
		}
	}
	if err != nil {
		return Story{}, err
	}
	return a.story(ctx, m, live)
}

// changesStep tells what the turn that took message id changed in the
// group's folder and memory.
func (a *Admin) changesStep(ctx context.Context, st *Story, add func(string, time.Time, string, string), folder store.Folder, id store.MessageID) error {
	c, err := a.DB.Changes.ForMessage(ctx, folder, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ci := changeInfo(c)
	at, state := c.EndedAt, "changed"
	switch {
	case c.Open():
		at, state = c.StartedAt, "running"
	case c.Summary.Empty():
		state = "unchanged"
	}
	d := fmt.Sprintf("turn %d: %s", c.ID, ci.Line)
	if state == "changed" {
		d += fmt.Sprintf(" (bridged diff %s %d)", folder, c.ID)
	}
	if c.Source != "" && state == "changed" {
		d += "; input from: " + c.Source
		later, err := a.DB.Changes.List(ctx, folder, c.StartedAt, false, storyRows)
		if err != nil {
			return err
		}
		for _, h := range later {
			if h.Kind == store.ChangeHeld && h.Undoes == c.ID {
				d += fmt.Sprintf("; its memory change is held for the owner (bridged undo %s %d applies it)", folder, h.ID)
			}
		}
	}
	if c.Note != "" {
		d += "; " + c.Note
	}
	add("changes", at, state, d)
	st.Steps[len(st.Steps)-1].Turn = int64(c.ID)
	return nil
}

// Story tells message ref's life (see storyLive) from the store alone.
func (a *Admin) Story(ctx context.Context, ref, chat string) (Story, error) {
	return a.storyLive(ctx, ref, chat, nil)
}

// story tells m's life; live, when the daemon runs, is what it runs now:
// the container of m's group, if up, tells when it started.
func (a *Admin) story(ctx context.Context, m store.StoredMessage, live *Live) (Story, error) {
	st := Story{Message: StoryMessage{ID: int64(m.ID), Chat: string(m.Chat), Channel: m.Channel, ExternalID: m.ExternalID,
		Sender: m.Sender, SenderName: m.SenderName, Text: m.Text, SentAt: m.SentAt, Late: m.Late, Mentioned: m.Mentioned}}
	arrived := m.SentAt
	if !m.StoredAt.IsZero() {
		t := m.StoredAt
		st.Message.StoredAt = &t
		arrived = t
	}
	add := func(step string, at time.Time, state, detail string) {
		s := StoryStep{Step: step, State: state, Detail: detail}
		if !at.IsZero() {
			t := at
			s.At = &t
			s.SinceMS = at.Sub(arrived).Milliseconds()
		}
		st.Steps = append(st.Steps, s)
	}

	from := m.Sender
	if m.SenderName != "" && m.SenderName != m.Sender {
		from = fmt.Sprintf("%s (%s)", m.SenderName, m.Sender)
	}
	switch {
	case m.IsBot:
		from = "bridged itself"
	case m.FromMe:
		from += ", the account bridged is logged in as"
	}
	channel := m.Channel
	if channel == "" {
		channel = "a channel not recorded"
	}
	add("received", m.SentAt, "", fmt.Sprintf("on %s from %s (the channel's time)", channel, from))
	if m.StoredAt.IsZero() {
		add("stored", time.Time{}, "", fmt.Sprintf("as message %d; when: not recorded (stored before bridged kept it)", m.ID))
	} else {
		d := fmt.Sprintf("as message %d, %s after it was sent", m.ID, round(m.StoredAt.Sub(m.SentAt)))
		add("stored", m.StoredAt, "", d)
	}

	g, err := a.DB.Groups.ByChat(ctx, m.Chat)
	if errors.Is(err, store.ErrNotFound) {
		st.Why = "the chat is no longer a registered group"
		add("trigger", time.Time{}, "not_matched", st.Why+": nothing more is known")
		return st, nil
	}
	if err != nil {
		return Story{}, err
	}
	st.Group = string(g.Folder)
	st.Woke, st.Why = a.wakes(g, m.Message)
	state := "not_matched"
	if st.Woke {
		state = "matched"
	}
	add("trigger", arrived, state, st.Why)

	if st.Woke {
		if err := a.budgetSteps(ctx, add, m.Chat, m.ID); err != nil {
			return Story{}, err
		}
	}

	cursor, err := a.DB.Sessions.Cursor(ctx, g.Folder)
	if err != nil {
		return Story{}, err
	}
	ends, err := a.DB.Turns.From(ctx, m.Chat, m.ID, storyRows)
	if err != nil {
		return Story{}, err
	}
	handed := cursor >= m.ID || len(ends) > 0
	switch {
	case cursor >= m.ID:
		add("handed", time.Time{}, "", "handed to the agent (the group's cursor is at message "+strconv.FormatInt(int64(cursor), 10)+"); when, and the queue's wait: not recorded")
	case handed:
		add("handed", time.Time{}, "", "handed to the agent, but no turn committed an answer to it: it stays pending and goes again with the next message that wakes the agent")
	default:
		add("handed", time.Time{}, "waiting", "not handed to the agent yet: it waits in the chat for the next message that wakes the agent")
	}
	var final time.Time
	for _, e := range ends {
		if e.Result != "failed" {
			final = e.At
			break
		}
	}
	if handed {
		if err := a.approvalSteps(ctx, add, g.Folder, arrived, final); err != nil {
			return Story{}, err
		}
		refused, err := a.DB.Budget.Refusals(ctx, g.Folder, arrived, final, storyRows)
		if err != nil {
			return Story{}, err
		}
		for _, d := range refused {
			add("budget", d.At, "refused", fmt.Sprintf("an API request of its turn was refused by the daily budget: $%.4f of $%s spent that day", d.SpentUSD, usd(d.BudgetUSD)))
		}
	}
	final = time.Time{}
	failed := 0
	for _, e := range ends {
		switch e.Result {
		case "failed":
			failed++
			add("turn", e.At, "failed", fmt.Sprintf("attempt %d of %d failed, retried: %s", e.Attempt, e.Attempts, orNone(e.Reason)))
			continue
		case "gave_up":
			add("turn", e.At, "gave_up", fmt.Sprintf("failed for good after %d attempts: %s", e.Attempt, orNone(e.Reason)))
		default:
			d := "ended: answered"
			if failed > 0 {
				d += fmt.Sprintf(" (after %d failed attempts)", failed)
			}
			add("turn", e.At, "done", d)
		}
		final = e.At
		break
	}
	if len(ends) == 0 {
		add("turn", time.Time{}, "", "no turn's end is recorded for it")
	}

	if handed {
		if err := a.changesStep(ctx, &st, add, g.Folder, m.ID); err != nil {
			return Story{}, err
		}
	}

	a.containerStep(add, string(g.Folder), handed, arrived, final, live)

	if st.Woke || !final.IsZero() {
		requests, cost, first, _, err := a.DB.Usage.APIBetween(ctx, g.Folder, arrived, final)
		if err != nil {
			return Story{}, err
		}
		if requests == 0 {
			add("cost", time.Time{}, "", "no Claude API request metered by the proxy")
		} else {
			add("cost", first, "", fmt.Sprintf("$%.4f over %d Claude API requests (the proxy's meter; the first at this time)", cost, requests))
		}
	}

	// Replies: what bridged sent to the chat from the message's arrival to
	// the next message that could wake the agent (or the end of its turn,
	// if later).
	_, next, err := a.DB.Messages.NextAfter(ctx, m.Chat, m.ID)
	if err != nil {
		return Story{}, err
	}
	if !next.IsZero() && !final.IsZero() && final.After(next) {
		next = final.Add(time.Second)
	}
	out, err := a.DB.Outbox.Between(ctx, m.Chat, g.Folder, arrived, next, storyRows)
	if err != nil {
		return Story{}, err
	}
	for _, it := range out {
		step := "reply"
		if it.Origin == store.OriginNotice {
			step = "notice"
		}
		text := prompt.Clip(prompt.OneLine(it.Text), 200)
		if it.Chat != m.Chat {
			text = "to " + string(it.Chat) + ": " + text
		}
		switch it.State {
		case store.OutboxSent:
			at := it.CreatedAt
			if it.SentAt != nil {
				at = *it.SentAt
			}
			d := fmt.Sprintf("outbox %d (%s) sent %s after it was queued", it.ID, it.Origin, round(at.Sub(it.CreatedAt)))
			if it.Attempts > 0 {
				d += fmt.Sprintf(", after %d failed attempt(s) (last error: %s)", it.Attempts, orNone(it.LastError))
			}
			add(step, at, "sent", d+": "+text)
		case store.OutboxFailed:
			at := it.CreatedAt
			if it.FailedAt != nil {
				at = *it.FailedAt
			}
			add(step, at, "failed", fmt.Sprintf("outbox %d (%s) not sent, for good, after %d attempt(s): %s; text: %s", it.ID, it.Origin, it.Attempts, orNone(it.LastError), text))
		default:
			d := fmt.Sprintf("outbox %d (%s) waiting to be sent", it.ID, it.Origin)
			if it.Attempts > 0 {
				d += fmt.Sprintf(" (%d attempt(s), last error: %s)", it.Attempts, orNone(it.LastError))
			}
			add(step, it.CreatedAt, "pending", d+": "+text)
		}
	}
	if len(out) == 0 {
		add("reply", time.Time{}, "", "nothing was sent to the chat after it")
	}
	return st, nil
}

// budgetSteps adds the daily budget's decisions on message id of chat, as
// the router recorded them when it made them (the budget and the day's
// spending of that moment, whatever they are now): held while the budget
// was used up, then let through, or let through at once. A message of a
// group without a budget then has none.
func (a *Admin) budgetSteps(ctx context.Context, add func(step string, at time.Time, state, detail string), chat store.ChatID, id store.MessageID) error {
	ds, err := a.DB.Budget.DecisionsOn(ctx, chat, id, storyRows)
	if err != nil {
		return err
	}
	paused := false
	for _, d := range ds {
		switch d.Verdict {
		case store.BudgetPaused:
			if !paused {
				paused = true
				add("budget", d.At, "paused", fmt.Sprintf("group paused by its daily budget: $%.4f of $%s spent that day; messages wait until midnight or a raised budget", d.SpentUSD, usd(d.BudgetUSD)))
			}
		case store.BudgetAdmitted:
			what := "within the daily budget"
			if paused {
				what = "let through: within the daily budget as it was then"
			}
			add("budget", d.At, "", fmt.Sprintf("%s: $%.4f of $%s spent that day", what, d.SpentUSD, usd(d.BudgetUSD)))
			return nil
		}
	}
	return nil
}

// approvalSteps adds a step for each approval request folder's agent made
// from the message's arrival to its turn's end (zero: not ended): which
// tool call waited, who answered it and after how long, or how long it has
// waited so far.
func (a *Admin) approvalSteps(ctx context.Context, add func(step string, at time.Time, state, detail string), folder store.Folder, arrived, final time.Time) error {
	end := final
	if !end.IsZero() {
		end = end.Add(time.Millisecond) // asked_at is stored in milliseconds
	}
	as, err := a.DB.Approvals.Asked(ctx, folder, arrived.Truncate(time.Millisecond), end, storyRows)
	if err != nil {
		return err
	}
	for _, ap := range as {
		what := fmt.Sprintf("approval %s (%s: %s)", ap.ID, ap.Tool, prompt.Clip(prompt.OneLine(ap.Subject), 120))
		if ap.State == store.ApprovalOpen {
			add("approval", ap.AskedAt, "waiting", fmt.Sprintf("%s waiting for the owner for %s; the turn is held meanwhile: `bridged approve %s` or `bridged deny %s`",
				what, round(a.now().Sub(ap.AskedAt)), ap.ID, ap.ID))
			continue
		}
		by := ap.DecidedBy
		switch by {
		case "cli":
			by = "the owner (command line)"
		case "dashboard":
			by = "the owner (dashboard)"
		case "chat", "quote", "reaction":
			by = "the owner (main chat, " + by + ")"
		case "timeout":
			by = "the approval timeout"
		}
		add("approval", ap.AskedAt, string(ap.State), fmt.Sprintf("%s %s by %s after %s waiting; the turn was held meanwhile",
			what, ap.State, by, round(ap.DecidedAt.Sub(ap.AskedAt))))
	}
	return nil
}

// containerStep adds the container step: which container took the
// message, known only while it runs (bridged keeps no record of
// containers). A message run container of the group that started before
// the message arrived was reused; one that started after it, and before
// its turn ended, was started for it.
func (a *Admin) containerStep(add func(step string, at time.Time, state, detail string), folder string, handed bool, arrived, final time.Time, live *Live) {
	const unknown = "reused or started, and when: not recorded (known only while its container runs)"
	if !handed {
		add("container", time.Time{}, "", "none: the message was not handed to an agent")
		return
	}
	if live == nil {
		add("container", time.Time{}, "", unknown)
		return
	}
	for _, c := range live.Containers {
		if c.Group != folder || c.Kind != "messages" || c.Since.IsZero() {
			continue
		}
		switch {
		case !final.IsZero() && c.Since.After(final):
			// Started after its turn ended: a later message's.
		case c.Since.Before(arrived):
			add("container", c.Since, "reused", "the group's container, running since this time, took it")
			return
		default:
			add("container", c.Since, "started", "a container was started for it at this time")
			return
		}
	}
	add("container", time.Time{}, "", unknown)
}

// wakes says whether m woke g's agent and why (not), by the group's rules
// as they are set now (the router's own test: internal/router late.go);
// whether its sender was allowed is what the group's allow list said when
// it arrived.
func (a *Admin) wakes(g store.Group, m store.Message) (bool, string) {
	trig := g.Trigger
	if strings.TrimSpace(trig) == "" {
		trig = "@" + a.AssistantName
	}
	switch {
	case m.IsBot:
		return false, "sent by bridged: its own messages never wake the agent"
	case m.NotAllowed:
		return false, fmt.Sprintf("sender not allowed: the group's allow list (%s) did not admit %s when it arrived, so it is kept as context for the next allowed message and never wakes the agent", allowText(g), m.Sender)
	case m.Late:
		return false, "late backlog: it reached bridged long after it was sent, or through a history sync, so it is kept as context and wakes no agent"
	case g.IsMain:
		return true, "the main group needs no trigger"
	case !g.RequiresTrigger:
		return true, "the group needs no trigger"
	case m.Mentioned:
		return true, "it mentions the assistant"
	case prompt.MatchTrigger(trig, m.Text):
		return true, fmt.Sprintf("it starts with the trigger %s", trig)
	}
	return false, fmt.Sprintf("no trigger word: it neither starts with %s nor mentions the assistant, so it waits as context for the next message that does", trig)
}

// allowText says who a group's allow list admits.
func allowText(g store.Group) string {
	if len(g.Allow) == 0 {
		return "now everyone"
	}
	if g.OwnerOnly() {
		return "the owner only"
	}
	return "the owner, " + strings.Join(g.Allow, ", ")
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "no error text"
	}
	return prompt.Clip(prompt.OneLine(s), 300)
}

// usd writes a budget as the owner set it.
func usd(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// round shortens d for a person.
func round(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// getStory answers GET /v1/messages/{id}/story[?chat=CHAT]: id is a message
// id or "last".
func (s *Server) getStory(w http.ResponseWriter, r *http.Request) {
	st, err := s.Story(r.Context(), r.PathValue("id"), r.URL.Query().Get("chat"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// Story tells message ref's life (see Admin.Story) with what the running
// daemon knows besides the store: the container that took it, while up.
func (s *Server) Story(ctx context.Context, ref, chat string) (Story, error) {
	var live *Live
	if s.opts.Status != nil {
		l := s.opts.Status.Live()
		live = &l
	}
	return s.opts.Admin.storyLive(ctx, ref, chat, live)
}

// Story asks the daemon for message ref's story (see Admin.Story).
func (c *Client) Story(ctx context.Context, ref, chat string) (Story, error) {
	if ref == "" {
		ref = "last"
	}
	path := "/v1/messages/" + url.PathEscape(ref) + "/story"
	if chat != "" {
		path += "?" + url.Values{"chat": {chat}}.Encode()
	}
	var st Story
	err := c.do(ctx, http.MethodGet, path, nil, &st)
	return st, err
}
