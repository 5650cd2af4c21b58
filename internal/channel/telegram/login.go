package telegram

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// CheckToken asks getMe with token and returns the bot it names. A token
// Telegram refuses is an error that says so (never showing the token).
func CheckToken(ctx context.Context, token, apiURL string) (models.User, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return models.User{}, errors.New("no bot token: put BRIDGED_TELEGRAM_TOKEN=<the token @BotFather gave you> in the env file (or the environment)")
	}
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	api, err := bot.New(token, bot.WithSkipGetMe(), bot.WithServerURL(strings.TrimSuffix(apiURL, "/")), bot.WithErrorsHandler(func(error) {}))
	if err != nil {
		return models.User{}, redact(err, token)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	me, err := api.GetMe(cctx)
	switch {
	case errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound):
		return models.User{}, errors.New("telegram refused the bot token (401): copy it again from @BotFather (/token), or make a new one")
	case err != nil:
		return models.User{}, fmt.Errorf("check the bot token with getMe: %w", redact(err, token))
	}
	return *me, nil
}

// StoreToken writes token to path, readable by its owner only (0600),
// through a temporary file renamed into place.
func StoreToken(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store the bot token: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".telegram-token-*")
	if err != nil {
		return fmt.Errorf("store the bot token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("store the bot token: %w", err)
	}
	if _, err := tmp.WriteString(strings.TrimSpace(token) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("store the bot token: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("store the bot token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store the bot token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("store the bot token: %w", err)
	}
	return nil
}

// StoredToken reads the token StoreToken wrote; "" when there is none.
func StoredToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the stored bot token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// LoginTimeout bounds `bridged login telegram`.
const LoginTimeout = time.Minute

// Diagnosis is what `bridged doctor` says of a bot token.
type Diagnosis struct {
	Bot     models.User
	Webhook string // the webhook's URL when one is set: it blocks getUpdates
}

// Diagnose checks token with getMe and asks whether a webhook is set.
func Diagnose(ctx context.Context, token, apiURL string) (Diagnosis, error) {
	me, err := CheckToken(ctx, token, apiURL)
	if err != nil {
		return Diagnosis{}, err
	}
	api, err := bot.New(strings.TrimSpace(token), bot.WithSkipGetMe(), bot.WithServerURL(strings.TrimSuffix(or(apiURL, DefaultAPIURL), "/")), bot.WithErrorsHandler(func(error) {}))
	if err != nil {
		return Diagnosis{}, redact(err, token)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	wh, err := api.GetWebhookInfo(cctx)
	if err != nil {
		return Diagnosis{Bot: me}, fmt.Errorf("getWebhookInfo: %w", redact(err, token))
	}
	return Diagnosis{Bot: me, Webhook: wh.URL}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
