package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/channel/telegram/telegramtest"
	"github.com/bridged-app/bridged/internal/config"
)

// `bridged login telegram` checks the env's token with getMe, stores it
// readable by its owner only, and never prints it; a refused token is said
// so and stores nothing.
func TestLoginTelegram(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	srv := telegramtest.New(t)
	srv.SetPrivacy(true)
	env := map[string]string{"BRIDGED_TELEGRAM_TOKEN": "999:wrong", "BRIDGED_TELEGRAM_API_URL": srv.URL}
	file := filepath.Join(home, "store", "telegram-token")
	if _, _, err := cli(t, ctx, env, "", "login", "--home", home, "telegram"); err == nil || !strings.Contains(err.Error(), "refused the bot token") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("login with a wrong token: %v; want it refused, without the token", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("a refused token was stored")
	}
	env["BRIDGED_TELEGRAM_TOKEN"] = telegramtest.Token
	out, errOut, err := cli(t, ctx, env, "", "login", "--home", home, "telegram")
	if err != nil {
		t.Fatalf("login: %v (%s)", err, errOut)
	}
	if !strings.Contains(out, "@"+telegramtest.BotName) || !strings.Contains(out, "privacy mode on") || strings.Contains(out+errOut, telegramtest.Token) {
		t.Errorf("login said %q; want the bot's name and the privacy warning, never the token", out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stored token: %v, %v; want a 0600 file", fi, err)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != telegramtest.Token {
		t.Errorf("stored %q; want the token", b)
	}
	out, _, _ = cli(t, ctx, env, "", "config", "--home", home)
	if strings.Contains(out, telegramtest.Token) {
		t.Error("`bridged config` prints the token")
	}
}

// doctor checks the token, and warns of a webhook, privacy mode and an
// owner not set; without a token Telegram is off, which is fine.
func TestDoctorTelegram(t *testing.T) {
	ctx := context.Background()
	srv := telegramtest.New(t)
	home := newHome(t)
	tgCfg := func(token string, owner int64) *config.Config {
		return &config.Config{Home: home, TelegramAPIURL: srv.URL, TelegramToken: token, TelegramOwner: owner}
	}
	cfg := tgCfg("", 0)
	if c := checkTelegram(ctx, cfg); c.status != "ok" || !strings.Contains(c.detail, "off") {
		t.Errorf("no token: %+v; want ok, off", c)
	}
	srv.SetPrivacy(true)
	cfg = tgCfg(telegramtest.Token, 0)
	c := checkTelegram(ctx, cfg)
	if c.status != "warn" || !strings.Contains(c.detail, "privacy mode is on") || !strings.Contains(c.detail, "BRIDGED_TELEGRAM_OWNER") || strings.Contains(c.detail, telegramtest.Token) {
		t.Errorf("privacy on, no owner: %+v; want a warning naming both", c)
	}
	srv.SetPrivacy(false)
	cfg = tgCfg(telegramtest.Token, 777)
	if c := checkTelegram(ctx, cfg); c.status != "ok" || !strings.Contains(c.detail, telegramtest.BotName) {
		t.Errorf("all well: %+v; want ok with the bot's name", c)
	}
	cfg = tgCfg("1:revoked", 777)
	if c := checkTelegram(ctx, cfg); c.status != "FAIL" {
		t.Errorf("a refused token: %+v; want FAIL", c)
	}
}
