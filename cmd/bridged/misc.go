package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/bridged-app/bridged/internal/channel/telegram"
	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version string

// buildVersion is the stamped version, else what the Go toolchain recorded.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return "devel-" + rev + modified
	}
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}

func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(b.Bytes()))
	return err
}

func (a *app) cmdVersion(ctx context.Context, args []string) error {
	fs := a.newFlagSet("version", "version")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "bridged", buildVersion())
	return nil
}

func (a *app) cmdConfig(ctx context.Context, args []string) error {
	fs := a.newFlagSet("config", "config [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the configuration as JSON")
	cf := config.Register(fs)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cfg, err := cf.Resolve(a.getenv)
	if err != nil {
		return err
	}
	a.noteUnknown(cfg)
	// A running daemon is asked: it may have started with other flags, or
	// before the env file changed.
	dc, running, err := askDaemon(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		out := configJSON(cfg.Values())
		out["source"] = "files"
		if running {
			out = configJSON(dc.Values)
			out["source"] = "daemon"
			out["credential_state"] = dc.Credential.State
		}
		return writeJSON(a.stdout, out)
	}
	if running {
		fmt.Fprintf(a.stdout, "# bridged is running in %s: the configuration it started with (secrets masked)\n", cfg.Home)
		fmt.Fprintf(a.stdout, "# credential: %s, %s\n", or(dc.Credential.Variable, "none"), dc.Credential.State)
		files := a.daemonFiles(fs, cf, cfg, dc.Values)
		for _, w := range files.Unknown {
			fmt.Fprintf(a.stdout, "# warning: %s\n", w)
		}
		printValues(a.stdout, dc.Values, filesValues(files))
		return nil
	}
	fmt.Fprintf(a.stdout, "# bridged is not running in %s: the configuration the flags, the environment and the env file give (secrets masked)\n", cfg.Home)
	for _, w := range append(cfg.Warnings, cfg.Unknown...) {
		fmt.Fprintf(a.stdout, "# warning: %s\n", w)
	}
	cfg.Print(a.stdout)
	return nil
}

func (a *app) cmdLogin(ctx context.Context, args []string) error {
	fs := a.newFlagSet("login", "login [whatsapp|telegram] [--phone NUMBER] [flags]")
	phone := fs.String("phone", "", "pair with a code for this phone number (digits with country code) instead of a QR code")
	rest, cfg, err := a.parseConfig(fs, args, 0, 1)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 1 && rest[0] == "telegram":
		return a.loginTelegram(ctx, cfg)
	case len(rest) == 1 && rest[0] != "whatsapp":
		fmt.Fprintf(a.stderr, "bridged login: want whatsapp or telegram, not %q\n", termsafe.Line(rest[0]))
		return errUsage
	}
	running, err := daemonRunning(ctx, control.NewClient(cfg.Socket()), cfg.Socket())
	if err != nil {
		return err
	}
	if running {
		return fmt.Errorf("bridged is running and holds the WhatsApp device store: stop it, run `bridged login`, then start it again")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.WhatsAppDB()), 0o700); err != nil {
		return fmt.Errorf("create store directory: %w", err)
	}
	if err := whatsapp.Login(ctx, whatsapp.LoginOptions{
		StorePath: cfg.WhatsAppDB(),
		Phone:     *phone,
		Out:       a.stdout,
		Log:       a.cliLogger(),
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "WhatsApp is paired. Start (or restart) the daemon with `bridged run`.")
	return nil
}

// loginTelegram checks the bot token of the env file (or the environment)
// with getMe and stores it 0600 under the home, for the daemon.
func (a *app) loginTelegram(ctx context.Context, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, telegram.LoginTimeout)
	defer cancel()
	me, err := telegram.CheckToken(ctx, cfg.TelegramToken, cfg.TelegramAPIURL)
	if err != nil {
		return err
	}
	if err := telegram.StoreToken(cfg.TelegramTokenFile(), cfg.TelegramToken); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Telegram: the token is the bot @%s's; stored in %s (readable by you only).\n", termsafe.Line(me.Username), cfg.TelegramTokenFile())
	if !me.CanReadAllGroupMessages {
		fmt.Fprintln(a.stdout, termsafe.Line(telegram.PrivacyWarning(me.Username)))
	}
	if cfg.TelegramOwner == 0 {
		fmt.Fprintln(a.stdout, "Set BRIDGED_TELEGRAM_OWNER to your Telegram user id so that your messages count as yours (approvals, /new).")
	}
	fmt.Fprintln(a.stdout, "Start (or restart) the daemon; `bridged groups list --available` then lists the chats the bot has seen.")
	return nil
}
