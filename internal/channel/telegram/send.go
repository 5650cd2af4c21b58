package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel"
)

// MaxMessageUnits is the longest text of one message, in UTF-16 code units
// (Telegram's 4,096 characters).
const MaxMessageUnits = 4096

// button is an inline keyboard button; the library's own type would also
// send an empty copy_text.
type button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

type keyboard struct {
	InlineKeyboard [][]button `json:"inline_keyboard"`
}

// Send sends m as plain text (no parse_mode), split below MaxMessageUnits,
// and returns the id of its first part. Parts already sent by an earlier
// attempt of the same m.ID are not sent again. A 429 is waited out while
// ctx allows; 403 and 401 are permanent (and the owner told once); a send
// whose request was written but not answered is channel.ErrAmbiguous.
func (c *Client) Send(ctx context.Context, m channel.Outgoing) (string, error) {
	return sender{c.core}.send(ctx, m)
}

// sender sends the outbox's messages (Client.Send): parts, files, the
// errors' classes.
type sender struct{ *core }

func (c sender) send(ctx context.Context, m channel.Outgoing) (string, error) {
	if c.api == nil {
		return "", fmt.Errorf("telegram: %w: no bot token", channel.ErrPermanent)
	}
	chat, ok := ChatNumber(m.Chat)
	if !ok {
		return "", fmt.Errorf("telegram: %w: not a Telegram chat: %s", channel.ErrPermanent, m.Chat)
	}
	if st := c.Status().State; st == channel.StateLoggedOut {
		return "", fmt.Errorf("telegram: %w: the bot token was refused", channel.ErrPermanent)
	}
	text := m.Text
	c.mu.Lock()
	done := c.parts[m.ID]
	c.mu.Unlock()
	if a := m.Attachment; a != nil && len(done) == 0 {
		// The file first, captioned with the text when it fits; otherwise
		// the text follows it.
		caption := ""
		if units(text) <= MaxCaption {
			caption, text = strings.TrimSpace(text), ""
		}
		id, err := c.sendFile(ctx, chat, *a, caption)
		if err != nil {
			return "", c.forget(m.ID, err)
		}
		c.mu.Lock()
		c.parts[m.ID] = []string{id}
		done = c.parts[m.ID]
		c.mu.Unlock()
	} else if m.Attachment != nil && len(done) > 0 && units(text) <= MaxCaption {
		text = "" // the file went with its caption
	}
	parts := Split(text, MaxMessageUnits)
	first := 0
	if m.Attachment != nil {
		first = 1 // done[0] is the file
	}
	for i := len(done) - first; i < len(parts); i++ {
		p := &bot.SendMessageParams{ChatID: chat, Text: parts[i]}
		if m.Notice && i == len(parts)-1 {
			if id, ok := approvals.RequestIDOf(text); ok {
				p.ReplyMarkup = keyboard{InlineKeyboard: [][]button{{
					{Text: "👍 Approve", CallbackData: callbackYes + id}, {Text: "👎 Deny", CallbackData: callbackNo + id},
				}}}
			}
		}
		id, err := c.sendPart(ctx, p)
		if err != nil {
			return "", c.forget(m.ID, err)
		}
		c.mu.Lock()
		c.parts[m.ID] = append(c.parts[m.ID], id)
		done = c.parts[m.ID]
		c.mu.Unlock()
	}
	c.mu.Lock()
	delete(c.parts, m.ID)
	c.mu.Unlock()
	if len(done) == 0 {
		return "", fmt.Errorf("telegram: %w: empty message", channel.ErrPermanent)
	}
	return done[0], nil
}

// migrated tells the owner, once, that a group became a supergroup with a
// new id, which must be registered instead of the old.
func (c *core) migrated(from, to int64) {
	c.setCondition("migrated/"+ChatID(from), channel.HealthStable, fmt.Sprintf(
		"Telegram: the group %s became a supergroup, now %s; its messages are not sent until it is registered again: `bridged groups remove` it and `bridged groups add` %s.",
		ChatID(from), ChatID(to), ChatID(to)))
}

// forget drops what is remembered of message id's parts when err ends it
// for good (the outbox will not try it again), and returns err.
func (c sender) forget(id string, err error) error {
	if errors.Is(err, channel.ErrPermanent) {
		c.mu.Lock()
		delete(c.parts, id)
		c.mu.Unlock()
	}
	return err
}

// sendPart sends one text message.
func (c sender) sendPart(ctx context.Context, p *bot.SendMessageParams) (string, error) {
	return c.sendCall(ctx, p.ChatID.(int64), func(ctx context.Context) (*models.Message, error) {
		ctx, cancel := context.WithTimeout(ctx, c.callTimeout) // a text's answer comes at once, or not at all
		defer cancel()
		return c.api.SendMessage(ctx, p)
	})
}

// sendCall makes one call that sends a message, waiting out 429s while ctx
// allows, and classes its error: permanent (403, 401, 400), ambiguous (the
// request was written, no answer came), or retryable.
func (c sender) sendCall(ctx context.Context, chat int64, call func(context.Context) (*models.Message, error)) (string, error) {
	for {
		if !c.waitHold(ctx) {
			return "", fmt.Errorf("telegram: waiting out a 429: %w", ctx.Err())
		}
		var wrote atomic.Bool
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		})
		msg, err := call(tctx)
		if err == nil {
			return strconv.Itoa(msg.ID), nil
		}
		err = redact(err, c.opts.Token)
		var tm *bot.TooManyRequestsError
		switch {
		case errors.As(err, &tm):
			c.holdFor(time.Duration(tm.RetryAfter) * time.Second)
			c.log.Warn().Int("retry_after", tm.RetryAfter).Msg("telegram asked to slow down (429)")
			continue
		case errors.Is(err, bot.ErrorUnauthorized):
			c.revoked()
			return "", fmt.Errorf("telegram: %w: %w", channel.ErrPermanent, err)
		case errors.Is(err, bot.ErrorForbidden):
			c.setCondition("removed/"+ChatID(chat), channel.HealthStable,
				"Telegram: the bot may not write to "+ChatID(chat)+" (removed from the group, or blocked): its messages are not sent. Add the bot again to resume.")
			return "", fmt.Errorf("telegram: %w: %w", channel.ErrPermanent, err)
		case bot.IsMigrateError(err):
			c.migrated(chat, int64(err.(*bot.MigrateError).MigrateToChatID))
			return "", fmt.Errorf("telegram: %w: %w", channel.ErrPermanent, err)
		case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorNotFound):
			return "", fmt.Errorf("telegram: %w: %w", channel.ErrPermanent, err)
		case isAnswer(err):
			return "", fmt.Errorf("telegram: %w", err) // a 5xx, say: Telegram says it failed; retried
		case wrote.Load():
			return "", fmt.Errorf("telegram: %w: %w: %w", channel.ErrPermanent, channel.ErrAmbiguous, err)
		}
		return "", fmt.Errorf("telegram: %w", err) // not written: safe to retry
	}
}

// Limits of the files a bot sends.
const (
	MaxUpload  = 50 << 20 // any file
	maxPhoto   = 10 << 20 // sent as a photo; larger ones go as documents
	MaxCaption = 1024     // UTF-16 units of a caption
)

// sendFile sends a's file to chat with caption (a photo as a photo, any
// other file as a document), from the copy on disk, opened again for each
// attempt. A file over MaxUpload is permanent.
func (c sender) sendFile(ctx context.Context, chat int64, a channel.Attachment, caption string) (string, error) {
	if a.Size > MaxUpload {
		return "", fmt.Errorf("telegram: %w: %s is %d bytes, over the 50 MB a bot may send", channel.ErrPermanent, a.Name, a.Size)
	}
	return c.sendCall(ctx, chat, func(ctx context.Context) (*models.Message, error) {
		f, err := os.Open(a.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: open the file: %w", bot.ErrorBadRequest, err)
		}
		defer f.Close()
		up := &models.InputFileUpload{Filename: a.Name, Data: f}
		if a.Kind == channel.KindImage && a.Size <= maxPhoto {
			return c.api.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: up, Caption: caption})
		}
		return c.api.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: up, Caption: caption})
	})
}

// isAnswer reports whether err is an answer of the Bot API (ok false), not
// a transport failure.
func isAnswer(err error) bool {
	for _, e := range []error{bot.ErrorForbidden, bot.ErrorBadRequest, bot.ErrorUnauthorized, bot.ErrorNotFound, bot.ErrorConflict, bot.ErrorTooManyRequests} {
		if errors.Is(err, e) {
			return true
		}
	}
	return strings.Contains(err.Error(), "error response from telegram")
}

// SetTyping shows the typing indicator in chat, kept alive every 4 s
// (Telegram's lasts 5) until it is turned off or for at most maxTyping; off
// stops the refresh (Telegram has no call to hide it: it fades).
func (c *Client) SetTyping(ctx context.Context, chat string, on bool) error {
	return typist{c.core}.set(ctx, chat, on)
}

// typist keeps each chat's typing indicator alive (Client.SetTyping).
type typist struct{ *core }

func (c typist) set(ctx context.Context, chat string, on bool) error {
	n, ok := ChatNumber(chat)
	if !ok || c.api == nil {
		return nil
	}
	c.mu.Lock()
	if stop, ok := c.typing[chat]; ok {
		stop()
		delete(c.typing, chat)
	}
	base := c.ctx
	if !on || base == nil || base.Err() != nil {
		c.mu.Unlock()
		if on {
			return c.chatAction(ctx, n)
		}
		return nil
	}
	tctx, stop := context.WithTimeout(base, maxTyping)
	c.typing[chat] = stop
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer stop()
		t := time.NewTicker(c.typingEvery)
		defer t.Stop()
		for {
			if err := c.chatAction(tctx, n); err != nil && tctx.Err() == nil {
				c.log.Debug().Err(err).Str("chat", chat).Msg("cannot show typing")
			}
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Typing refresh: Telegram shows a chat action for 5 s.
const (
	typingEvery = 4 * time.Second
	maxTyping   = 10 * time.Minute
)

func (c typist) chatAction(ctx context.Context, chat int64) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.api.SendChatAction(cctx, &bot.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping})
	return redact(err, c.opts.Token)
}

// Split cuts text into parts of at most max UTF-16 code units, at a
// paragraph break, else a line break, else a space, else between runes
// (never inside one). Parts are trimmed of the whitespace they were cut at;
// blank text gives none.
func Split(text string, max int) []string {
	var parts []string
	for {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return parts
		}
		if units(text) <= max {
			return append(parts, strings.TrimRightFunc(text, unicode.IsSpace))
		}
		// the longest prefix within max, at a rune boundary
		end, n := 0, 0
		for i, r := range text {
			w := utf16.RuneLen(r)
			if w < 0 {
				w = 1
			}
			if n+w > max {
				end = i
				break
			}
			n += w
		}
		cut := end
		for _, sep := range []string{"\n\n", "\n", " "} {
			if i := strings.LastIndex(text[:end], sep); i > 0 && i > end/2 {
				cut = i
				break
			}
		}
		parts = append(parts, strings.TrimRightFunc(text[:cut], unicode.IsSpace))
		text = text[cut:]
	}
}

// units counts s's UTF-16 code units.
func units(s string) int {
	n := 0
	for _, r := range s {
		if w := utf16.RuneLen(r); w > 0 {
			n += w
		} else {
			n++
		}
	}
	return n
}
