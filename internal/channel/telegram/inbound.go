package telegram

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// SenderID is the sender id of Telegram user n.
func SenderID(n int64) string { return Prefix + strconv.FormatInt(n, 10) }

func chatName(c models.Chat) string {
	if c.Title != "" {
		return c.Title
	}
	return strings.TrimSpace(c.FirstName + " " + c.LastName)
}

func isGroup(c models.Chat) bool {
	return c.Type == models.ChatTypeGroup || c.Type == models.ChatTypeSupergroup
}

func userName(u *models.User) string {
	if u == nil {
		return ""
	}
	if n := strings.TrimSpace(u.FirstName + " " + u.LastName); n != "" {
		return n
	}
	return u.Username
}

// message builds the channel's message from a Telegram message; false for
// one that carries nothing bridged keeps (a service message).
func (c poller) message(ctx context.Context, tm *models.Message) (channel.Message, bool) {
	me := c.Me()
	text, entities := tm.Text, tm.Entities
	if text == "" && tm.Caption != "" {
		text, entities = tm.Caption, tm.CaptionEntities
	}
	file, hasFile := fileOf(tm)
	placeholder := ""
	if !hasFile {
		placeholder = mediaLabel(tm)
	}
	if text == "" && placeholder == "" && !hasFile {
		return channel.Message{}, false
	}
	mentioned, text := c.mentions(me, text, entities)
	m := channel.Message{
		Chat:       ChatID(tm.Chat.ID),
		ChatName:   chatName(tm.Chat),
		IsGroup:    isGroup(tm.Chat),
		ExternalID: strconv.Itoa(tm.ID),
		Text:       text,
		SentAt:     time.Unix(int64(tm.Date), 0),
		Mentioned:  mentioned,
	}
	if tm.From != nil {
		m.Sender, m.SenderName = SenderID(tm.From.ID), userName(tm.From)
		m.FromMe = c.opts.Owner != 0 && tm.From.ID == c.opts.Owner
		m.IsBot = me.ID != 0 && tm.From.ID == me.ID
		if m.IsGroup && !m.FromMe && !m.IsBot {
			m.SenderAdmin = c.isAdmin(ctx, tm.Chat.ID, tm.From.ID)
		}
	} else if tm.SenderChat != nil {
		m.Sender, m.SenderName = ChatID(tm.SenderChat.ID), chatName(*tm.SenderChat)
	}
	if placeholder != "" {
		if m.Text != "" {
			m.Text += "\n"
		}
		m.Text += "[" + placeholder + "]"
	}
	tail := ""
	if r := tm.ReplyToMessage; r != nil {
		m.QuotedID = strconv.Itoa(r.ID)
		if r.From != nil && me.ID != 0 && r.From.ID == me.ID {
			m.Mentioned = true // a reply to the bot
		}
		tail = quoteNote(r)
	}
	if hasFile {
		head := m.Text
		if head != "" {
			head += "\n"
		}
		var instead string
		if m.Media, instead = mediaFor(file, head, tail); m.Media == nil {
			m.Text = head + instead
		}
	}
	m.Text += tail
	return m, true
}

// quoteNote shows the agent what a reply quotes.
func quoteNote(r *models.Message) string {
	who := userName(r.From)
	q := r.Text
	if q == "" {
		q = r.Caption
	}
	q = strings.Join(strings.Fields(q), " ")
	if rs := []rune(q); len(rs) > 80 {
		q = string(rs[:80]) + "…"
	}
	if q == "" {
		return fmt.Sprintf("%s%s]", channel.QuoteNote, who)
	}
	return fmt.Sprintf("%s%s: \"%s\"]", channel.QuoteNote, who, q)
}

// mediaLabel is the placeholder of what a message carries besides text
// that bridged does not fetch (photos, documents, voice notes and audio
// are fetched: fileOf).
func mediaLabel(tm *models.Message) string {
	switch {
	case tm.Video != nil:
		return "video: not downloaded"
	case tm.VideoNote != nil:
		return "video note: not downloaded"
	case tm.Sticker != nil:
		return "sticker"
	}
	return ""
}

// mentions reports whether entities of text mention the bot me: a
// mention (@name), a text_mention of its user, a text_link to
// tg://user?id=<its id>, or a /command@name. Each @name of the bot is
// rewritten to the assistant's trigger, so the agent reads its own name.
func (c poller) mentions(me models.User, text string, entities []models.MessageEntity) (bool, string) {
	if me.ID == 0 || len(entities) == 0 {
		return false, text
	}
	units := utf16.Encode([]rune(text))
	sub := func(e models.MessageEntity) string {
		if e.Offset < 0 || e.Length < 0 || e.Offset+e.Length > len(units) {
			return ""
		}
		return string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
	}
	name := strings.ToLower(me.Username)
	var rewrite []models.MessageEntity
	mentioned := false
	for _, e := range entities {
		switch e.Type {
		case models.MessageEntityTypeMention:
			if name != "" && strings.EqualFold(sub(e), "@"+name) {
				mentioned = true
				rewrite = append(rewrite, e)
			}
		case models.MessageEntityTypeTextMention:
			if e.User != nil && e.User.ID == me.ID {
				mentioned = true
			}
		case models.MessageEntityTypeTextLink:
			if isUserLink(e.URL, me.ID) {
				mentioned = true
			}
		case models.MessageEntityTypeBotCommand:
			if _, at, ok := strings.Cut(sub(e), "@"); ok && name != "" && strings.EqualFold(at, name) {
				mentioned = true
			}
		}
	}
	trigger := "@" + c.opts.AssistantName
	if len(rewrite) == 0 || c.opts.AssistantName == "" {
		return mentioned, text
	}
	slices.SortFunc(rewrite, func(a, b models.MessageEntity) int { return b.Offset - a.Offset })
	for _, e := range rewrite {
		units = slices.Concat(units[:e.Offset], utf16.Encode([]rune(trigger)), units[e.Offset+e.Length:])
	}
	return mentioned, string(utf16.Decode(units))
}

// isUserLink reports whether u is tg://user?id=<id>.
func isUserLink(u string, id int64) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(u), "tg://user?id=")
	return ok && rest == strconv.FormatInt(id, 10)
}

// Callback data of the buttons under an approval request.
const (
	callbackYes = "yes "
	callbackNo  = "no "
)

// callback turns a button press under an approval request into a 👍/👎
// reaction to the request's message, the owner's only when the owner's id
// pressed it (the approvals take no one else's), and answers the press.
func (c poller) callback(ctx context.Context, q *models.CallbackQuery, ack store.PollAck) error {
	msg := q.Message.Message
	emoji := ""
	switch {
	case strings.HasPrefix(q.Data, callbackYes):
		emoji = "👍"
	case strings.HasPrefix(q.Data, callbackNo):
		emoji = "👎"
	}
	if msg == nil || emoji == "" {
		return c.opts.Sink.Ack(ctx, ack)
	}
	m := channel.Message{
		Chat: ChatID(msg.Chat.ID), ExternalID: "cb-" + q.ID, Sender: SenderID(q.From.ID), SenderName: userName(&q.From),
		FromMe:   c.opts.Owner != 0 && q.From.ID == c.opts.Owner,
		Reaction: &channel.Reaction{TargetID: strconv.Itoa(msg.ID), Emoji: emoji},
		SentAt:   c.opts.Now(),
	}
	_, err := c.opts.Sink.Inbound(ctx, m, ack)
	if err != nil {
		return err
	}
	text := "Only the owner's answer counts."
	if m.FromMe {
		text = "Answered."
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.api.AnswerCallbackQuery(actx, &bot.AnswerCallbackQueryParams{CallbackQueryID: q.ID, Text: text}); err != nil {
		c.log.Debug().Err(redact(err, c.opts.Token)).Msg("cannot answer a button press")
	}
	return nil
}

// adminCache keeps each group's admins for a while (getChatAdministrators).
type adminCache struct {
	entries map[int64]adminEntry
}

type adminEntry struct {
	ids []int64
	at  time.Time
}

// adminTTL is how long a group's admins are trusted.
const adminTTL = 10 * time.Minute

// isAdmin reports whether user is an admin of chat, from getChatAdministrators
// at most every adminTTL per chat; false when they cannot be read.
func (c poller) isAdmin(ctx context.Context, chat, user int64) bool {
	now := c.opts.Now()
	c.mu.Lock()
	e, ok := c.admins.entries[chat]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) > adminTTL {
		e = adminEntry{at: now}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ms, err := c.api.GetChatAdministrators(actx, &bot.GetChatAdministratorsParams{ChatID: chat})
		cancel()
		if err != nil {
			c.log.Debug().Err(redact(err, c.opts.Token)).Int64("chat", chat).Msg("cannot read a group's admins")
		}
		for _, m := range ms {
			switch {
			case m.Owner != nil && m.Owner.User != nil:
				e.ids = append(e.ids, m.Owner.User.ID)
			case m.Administrator != nil:
				e.ids = append(e.ids, m.Administrator.User.ID)
			}
		}
		c.mu.Lock()
		c.admins.entries[chat] = e
		c.mu.Unlock()
	}
	return slices.Contains(e.ids, user)
}
