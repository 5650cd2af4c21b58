package whatsapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.mau.fi/whatsmeow/types/events"
)

// Pairing timeouts, as mautrix-whatsapp uses them: how long `bridged login`
// waits for the connection to WhatsApp, for the first code once connected,
// and for WhatsApp to hand out a pairing code.
const (
	loginConnectTimeout = 30 * time.Second
	loginPairTimeout    = 30 * time.Second
)

// Pairing errors besides ErrLoginTimeout and ErrClientOutdated.
var (
	// ErrConnectTimeout means WhatsApp did not answer in time.
	ErrConnectTimeout = errors.New("WhatsApp did not answer within 30s: check this machine's network (and any proxy), then run `bridged login` again")
	// ErrPasskeyRequired means WhatsApp asks for the account's passkey,
	// which a terminal cannot give.
	ErrPasskeyRequired = errors.New("WhatsApp asks for this account's passkey to link a device, which bridged cannot give from a terminal; " +
		"remove the passkey on the phone (WhatsApp → Settings → Account → Passkeys), run `bridged login` again, then create the passkey again")
	// ErrPasskeyNotConfirmed means the owner did not confirm the code.
	ErrPasskeyNotConfirmed = errors.New("the linking code was not confirmed, so nothing was linked; run `bridged login` again and compare the codes")
)

// printPasskeyRequest tells the owner WhatsApp asks for a passkey and what
// to do about it.
func printPasskeyRequest(w io.Writer, e *events.PairPasskeyRequest) {
	fmt.Fprintln(w, "\nWhatsApp asks for this account's passkey before it links a new device.")
	if pk := e.PublicKey; pk != nil && pk.RelyingPartID != "" {
		fmt.Fprintf(w, "(passkey for %s", pk.RelyingPartID)
		if pk.Timeout > 0 {
			fmt.Fprintf(w, ", to be given within %s", (time.Duration(pk.Timeout) * time.Millisecond).Round(time.Second))
		}
		fmt.Fprintln(w, ")")
	}
	fmt.Fprintln(w, "bridged runs in a terminal and cannot use a passkey. To link it:")
	fmt.Fprintln(w, "  1. On your phone: WhatsApp → Settings → Account → Passkeys → remove the passkey.")
	fmt.Fprintln(w, "  2. Run `bridged login` again and link as before.")
	fmt.Fprintln(w, "  3. Create the passkey again on the phone (same menu).")
}

// confirmPasskey shows the code WhatsApp derived for this link, asks the
// owner to compare it with the phone's, and reports whether they typed
// yes. It returns ctx's error when ctx ends first.
func confirmPasskey(ctx context.Context, w io.Writer, in io.Reader, e *events.PairPasskeyConfirmation) (bool, error) {
	fmt.Fprintf(w, "\nYour phone shows a linking code. This device's code: %s\n", e.Code)
	fmt.Fprintln(w, "If the phone shows the same code, type yes and press Enter; anything else cancels the link.")
	fmt.Fprint(w, "Same code? ")
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		return a == "yes" || a == "y", nil
	case <-ctx.Done():
		fmt.Fprintln(w)
		return false, ctx.Err()
	}
}

// passkeyError says what failed in the passkey step and what to try.
func passkeyError(e error, continuation bool) error {
	stage := "WhatsApp's passkey request could not be read"
	if continuation {
		stage = "the phone's answer to the passkey step could not be used"
	}
	return fmt.Errorf("pairing failed: %s (%w); run `bridged login` again, and if it fails the same way, "+
		"remove the passkey on the phone (WhatsApp → Settings → Account → Passkeys) before linking", stage, e)
}

// connectWithin connects lc under ctx (the connection lives as long as
// ctx) and waits at most d for it.
func connectWithin(ctx context.Context, lc loginClient, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- lc.Connect(ctx) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("connect to WhatsApp: %w; check this machine's network, then run `bridged login` again", err)
		}
		return nil
	case <-t.C:
		return ErrConnectTimeout
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ErrConnectTimeout
		}
		return ctx.Err()
	}
}
