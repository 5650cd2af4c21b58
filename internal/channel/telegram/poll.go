package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// allowedUpdates are the updates bridged asks for.
var allowedUpdates = []string{models.AllowedUpdateMessage, models.AllowedUpdateCallbackQuery, models.AllowedUpdateMyChatMember,
	models.AllowedUpdateMessageReaction}

// apiError is a Bot API answer with ok false.
type apiError struct {
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("telegram answered %d: %s", e.Code, e.Description)
}

// Is makes a 401, 403, 409 answer match the library's errors.
func (e *apiError) Is(target error) bool {
	switch target {
	case bot.ErrorUnauthorized:
		return e.Code == http.StatusUnauthorized
	case bot.ErrorForbidden:
		return e.Code == http.StatusForbidden
	case bot.ErrorConflict:
		return e.Code == http.StatusConflict
	case bot.ErrorTooManyRequests:
		return e.Code == http.StatusTooManyRequests
	}
	return false
}

// poller runs the getUpdates loop and turns each update into what the
// sink commits (inbound.go builds the messages).
type poller struct{ *core }

// getUpdates asks for the updates from offset on, waiting up to the poll
// timeout for one. The library's poller is not used: it confirms updates
// before they are committed.
func (c poller) getUpdates(ctx context.Context, offset int64) ([]models.Update, error) {
	body, _ := json.Marshal(map[string]any{
		"offset": offset, "timeout": int(c.opts.PollTimeout / time.Second), "allowed_updates": allowedUpdates,
	})
	cctx, cancel := context.WithTimeout(ctx, c.opts.PollTimeout+c.callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, c.url+"/bot"+c.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, redact(err, c.opts.Token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, redact(fmt.Errorf("getUpdates: %w", err), c.opts.Token)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: read the answer: %w", err)
	}
	var r struct {
		OK          bool            `json:"ok"`
		Result      []models.Update `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d, not a Bot API answer: %w", resp.StatusCode, err)
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &apiError{Code: code, Description: r.Description, RetryAfter: r.Parameters.RetryAfter}
	}
	return r.Result, nil
}

// poll is the getUpdates loop: each update is committed (with the offset
// past it) before the next getUpdates is sent, from the committed offset.
func (c poller) poll(ctx context.Context) {
	delay := time.Duration(0)
	for ctx.Err() == nil {
		if !sleep(ctx, delay) {
			return
		}
		next, err := c.opts.Sink.Next(ctx)
		if err != nil {
			delay = c.backoff(delay)
			c.log.Error().Err(err).Msg("cannot read the committed update offset; polling waits")
			continue
		}
		if !c.waitHold(ctx) {
			return
		}
		updates, err := c.getUpdates(ctx, next)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delay = c.pollFailed(err, delay)
			continue
		}
		c.pollAnswered()
		delay = 0
		for _, u := range updates {
			if u.ID < next {
				continue // committed before: Telegram has not heard the offset yet
			}
			if err := c.handle(ctx, u); err != nil && !errors.Is(err, store.ErrExists) {
				if ctx.Err() != nil {
					return
				}
				// Not committed: it comes again with the next poll, which
				// asks from the committed offset.
				c.log.Error().Err(err).Int64("update", u.ID).Msg("cannot commit a Telegram update; it is asked for again")
				delay = c.backoff(delay)
				break
			}
		}
	}
}

// pollAnswered records a getUpdates that answered.
func (c poller) pollAnswered() {
	c.mu.Lock()
	c.polled = c.opts.Now()
	c.mu.Unlock()
	c.clearCondition("conflict")
	c.setState(channel.StateConnected, "")
}

// pollFailed handles a failed getUpdates and returns the wait before the
// next one.
func (c poller) pollFailed(err error, delay time.Duration) time.Duration {
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.Code {
		case http.StatusUnauthorized:
			c.revoked()
			return time.Hour // nothing works until the owner acts and restarts
		case http.StatusConflict:
			c.setCondition("conflict", channel.HealthReplaced, "Telegram: another program polls this bot's updates, or a webhook is set ("+ae.Description+
				"); bridged cannot receive messages until it stops (deleteWebhook, or stop the other program).")
			c.log.Warn().Str("reason", ae.Description).Msg("telegram getUpdates conflict: another poller or a webhook")
			return c.backoff(delay)
		case http.StatusTooManyRequests:
			c.holdFor(time.Duration(ae.RetryAfter) * time.Second)
			return 0
		}
	}
	c.log.Warn().Err(err).Msg("telegram getUpdates failed; retrying")
	c.setState(channel.StateReconnecting, "")
	return c.backoff(delay)
}

// backoff is the wait after a failure that followed a wait of d.
func (c *core) backoff(d time.Duration) time.Duration {
	if d <= 0 {
		return c.firstBackoff
	}
	return min(d*2, maxBackoff)
}

// holdFor keeps every Bot API call from being sent for d (a 429).
func (c *core) holdFor(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	c.mu.Lock()
	if until := c.opts.Now().Add(d); until.After(c.hold) {
		c.hold = until
	}
	c.mu.Unlock()
}

// waitHold waits out a 429's retry_after; false when ctx ended first.
func (c *core) waitHold(ctx context.Context) bool {
	c.mu.Lock()
	wait := c.hold.Sub(c.opts.Now())
	c.mu.Unlock()
	return sleep(ctx, wait)
}

// handle commits one update through the sink.
func (c poller) handle(ctx context.Context, u models.Update) error {
	ack := store.PollAck{Channel: ChannelName, UpdateID: u.ID}
	switch {
	case u.Message != nil:
		if to := u.Message.MigrateToChatID; to != 0 {
			c.migrated(u.Message.Chat.ID, to)
		}
		m, ok := c.message(ctx, u.Message)
		if !ok {
			return c.opts.Sink.Ack(ctx, ack)
		}
		c.clearCondition("removed/" + m.Chat)
		_, err := c.opts.Sink.Inbound(ctx, m, ack)
		return err
	case u.CallbackQuery != nil:
		return c.callback(ctx, u.CallbackQuery, ack)
	case u.MyChatMember != nil:
		return c.membership(ctx, u.MyChatMember, ack)
	case u.MessageReaction != nil:
		return c.reaction(ctx, u.MessageReaction, ack)
	}
	return c.opts.Sink.Ack(ctx, ack)
}

// membership records a chat the bot was added to or left.
func (c poller) membership(ctx context.Context, u *models.ChatMemberUpdated, ack store.PollAck) error {
	chat := ChatID(u.Chat.ID)
	switch u.NewChatMember.Type {
	case models.ChatMemberTypeLeft, models.ChatMemberTypeBanned:
		c.log.Info().Str("chat", chat).Msg("the bot was removed from a Telegram chat")
	default:
		c.clearCondition("removed/" + chat)
	}
	return c.opts.Sink.Seen(ctx, chat, chatName(u.Chat), isGroup(u.Chat), ack)
}

// reaction hands a reaction to a message on as a channel reaction (the
// owner's 👍/👎 to an approval request answers it; no reaction is stored).
// Telegram sends reactions in groups only to a bot that is an admin.
func (c poller) reaction(ctx context.Context, r *models.MessageReactionUpdated, ack store.PollAck) error {
	emoji := ""
	for _, t := range r.NewReaction {
		if t.ReactionTypeEmoji != nil {
			emoji = t.ReactionTypeEmoji.Emoji
		}
	}
	if r.User == nil || emoji == "" {
		return c.opts.Sink.Ack(ctx, ack)
	}
	m := channel.Message{
		Chat: ChatID(r.Chat.ID), ExternalID: fmt.Sprintf("re-%d-%d", r.MessageID, r.User.ID), Sender: SenderID(r.User.ID), SenderName: userName(r.User),
		FromMe:   c.opts.Owner != 0 && r.User.ID == c.opts.Owner,
		Reaction: &channel.Reaction{TargetID: strconv.Itoa(r.MessageID), Emoji: emoji},
		SentAt:   time.Unix(int64(r.Date), 0),
	}
	_, err := c.opts.Sink.Inbound(ctx, m, ack)
	return err
}
