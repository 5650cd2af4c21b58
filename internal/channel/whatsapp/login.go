package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types/events"
	waLog "go.mau.fi/whatsmeow/util/log"
	"google.golang.org/protobuf/proto"
)

// DefaultLoginTimeout bounds `bridged login`. WhatsApp offers QR codes for
// about 160 seconds.
const DefaultLoginTimeout = 3 * time.Minute

// maxQRBytes is the most a low-redundancy QR code holds; qrterminal
// cannot draw more.
const maxQRBytes = 2900

// connectedAfterPairing is how long Login waits for the first real
// connection after the phone accepted the pairing.
const connectedAfterPairing = 30 * time.Second

// Login errors.
var (
	// ErrLoginTimeout means no code was scanned or typed in time.
	ErrLoginTimeout = errors.New("pairing timed out: no code was scanned in time; run `bridged login` again")
	// ErrClientOutdated means WhatsApp refuses this version of the client.
	ErrClientOutdated = errors.New("WhatsApp rejected this client as outdated (405): update bridged and try again")
)

// LoginOptions configures Login.
type LoginOptions struct {
	StorePath string        // <home>/store/whatsapp.db
	Phone     string        // pair with a code for this number (digits with country code) instead of a QR code
	Out       io.Writer     // where codes and instructions go (the terminal)
	In        io.Reader     // where the owner confirms a passkey link's code (the terminal); os.Stdin when nil
	Timeout   time.Duration // DefaultLoginTimeout when zero
	Log       zerolog.Logger
}

// Login pairs bridged with a phone: it draws QR codes in opts.Out as
// WhatsApp rotates them (or prints a pairing code when opts.Phone is set) and
// returns nil once the phone accepted, ErrLoginTimeout when nobody scanned in
// time, ErrClientOutdated when WhatsApp refuses this version. A store that is
// already paired is left alone.
func Login(ctx context.Context, opts LoginOptions) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.In == nil {
		opts.In = os.Stdin
	}
	log := opts.Log.With().Str("component", "whatsapp-login").Logger()
	ds, err := openStore(ctx, opts.StorePath, opts.Log)
	if err != nil {
		return err
	}
	defer func() { _ = ds.Close() }()
	device, err := ds.container.GetFirstDevice(ctx)
	if err != nil {
		return fmt.Errorf("load whatsapp device: %w", err)
	}
	if device.ID != nil {
		fmt.Fprintf(opts.Out, "Already paired as +%s. To pair again, stop bridged and delete %s first.\n",
			device.ID.User, opts.StorePath)
		return nil
	}
	ver := newVersioner(ds, log)
	ver.applyCached(ctx)
	ver.refresh(ctx)
	store.DeviceProps.Os = proto.String("bridged")

	wlog := opts.Log.With().Str("component", "whatsmeow").Logger().Level(max(zerolog.WarnLevel, opts.Log.GetLevel()))
	wc := whatsmeow.NewClient(device, waLog.Zerolog(wlog))
	lc := &realLogin{c: wc, connected: make(chan struct{}, 1)}
	wc.AddEventHandler(func(evt any) {
		switch e := evt.(type) {
		case *events.Connected:
			signal(lc.connected)
		case *events.PairPasskeyError:
			lc.passkeyErr.Store(e) // before the QR channel reports it as a plain error
		}
	})
	defer wc.Disconnect()
	return login(ctx, lc, opts)
}

// loginClient is what login needs from whatsmeow.
type loginClient interface {
	// QRChannel must be called before Connect.
	QRChannel(ctx context.Context) (<-chan whatsmeow.QRChannelItem, error)
	Connect(ctx context.Context) error
	// PairPhone asks WhatsApp for a pairing code for phone.
	PairPhone(ctx context.Context, phone string) (string, error)
	// WaitConnected waits for the first authenticated connection.
	WaitConnected(ctx context.Context) bool
	// SendPasskeyConfirmation finishes a passkey link once the owner
	// confirmed the code.
	SendPasskeyConfirmation(ctx context.Context) error
	// PasskeyFailure is the passkey error behind the last error item, nil
	// when it was another one.
	PasskeyFailure() *events.PairPasskeyError
}

type realLogin struct {
	c          *whatsmeow.Client
	connected  chan struct{}
	passkeyErr atomic.Pointer[events.PairPasskeyError]
}

func (r *realLogin) SendPasskeyConfirmation(ctx context.Context) error {
	return r.c.SendPasskeyConfirmation(ctx)
}

func (r *realLogin) PasskeyFailure() *events.PairPasskeyError { return r.passkeyErr.Load() }

func (r *realLogin) QRChannel(ctx context.Context) (<-chan whatsmeow.QRChannelItem, error) {
	return r.c.GetQRChannel(ctx)
}

func (r *realLogin) Connect(ctx context.Context) error { return r.c.ConnectContext(ctx) }

func (r *realLogin) PairPhone(ctx context.Context, phone string) (string, error) {
	return r.c.PairPhone(ctx, phone, true, whatsmeow.PairClientChrome, "Chrome (Linux)")
}

func (r *realLogin) WaitConnected(ctx context.Context) bool {
	select {
	case <-r.connected:
		return true
	case <-ctx.Done():
		return false
	}
}

// login runs the pairing conversation over lc.
func login(ctx context.Context, lc loginClient, opts LoginOptions) error {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLoginTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	phone := digits(opts.Phone)
	if opts.Phone != "" && len(phone) < 7 {
		return fmt.Errorf("phone number %q: want the full number with country code, e.g. 491701234567", opts.Phone)
	}

	items, err := lc.QRChannel(ctx)
	if err != nil {
		return fmt.Errorf("start pairing: %w", err)
	}
	if err := connectWithin(ctx, lc, loginConnectTimeout); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ErrLoginTimeout // the login's own time ran out while it connected
		}
		return err
	}
	codes := 0
	first := time.NewTimer(loginPairTimeout) // the first code comes at once, or WhatsApp is not answering
	defer first.Stop()
	for {
		var item whatsmeow.QRChannelItem
		var open bool
		select {
		case item, open = <-items:
			first.Stop()
		case <-first.C:
			return ErrConnectTimeout
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ErrLoginTimeout
			}
			return ctx.Err()
		}
		if !open {
			return ErrLoginTimeout
		}
		switch item.Event {
		case whatsmeow.QRChannelEventCode:
			codes++
			if phone != "" {
				if codes > 1 {
					continue // the pairing code stays valid; QR rotations do not matter
				}
				pctx, pcancel := context.WithTimeout(ctx, loginPairTimeout)
				code, err := lc.PairPhone(pctx, phone)
				pcancel()
				if err != nil {
					return fmt.Errorf("request pairing code for +%s: %w; check the number and this machine's network, then run `bridged login` again", phone, err)
				}
				printPairingCode(opts.Out, code)
				continue
			}
			printQR(opts.Out, item.Code, codes, item.Timeout)
		case whatsmeow.QRChannelSuccess.Event:
			fmt.Fprintln(opts.Out, "Paired. Finishing the first connection…")
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), connectedAfterPairing)
			ok := lc.WaitConnected(wctx)
			wcancel()
			if !ok {
				fmt.Fprintln(opts.Out, "The phone accepted the pairing; the first connection is still settling.")
			}
			fmt.Fprintln(opts.Out, "WhatsApp is paired. Start bridged (or restart it: systemctl restart bridged).")
			return nil
		case whatsmeow.QRChannelTimeout.Event:
			return ErrLoginTimeout
		case whatsmeow.QRChannelClientOutdated.Event:
			return ErrClientOutdated
		case whatsmeow.QRChannelScannedWithoutMultidevice.Event:
			return errors.New("the phone scanned the code without multi-device support: update WhatsApp on the phone and try again")
		case whatsmeow.QRChannelErrUnexpectedEvent.Event:
			return errors.New("unexpected connection state while pairing: the store may already be paired; run `bridged login` again")
		case whatsmeow.QRChannelEventPasskeyRequest:
			if item.PasskeyRequest != nil {
				printPasskeyRequest(opts.Out, item.PasskeyRequest)
			}
			return ErrPasskeyRequired
		case whatsmeow.QRChannelEventPasskeyResponse:
			if item.PasskeyConfirmation == nil {
				return errors.New("pairing failed: WhatsApp sent an empty passkey confirmation; run `bridged login` again")
			}
			ok, err := confirmPasskey(ctx, opts.Out, opts.In, item.PasskeyConfirmation)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					return ErrLoginTimeout
				}
				return err
			}
			if !ok {
				return ErrPasskeyNotConfirmed
			}
			if err := lc.SendPasskeyConfirmation(ctx); err != nil {
				return fmt.Errorf("pairing failed: cannot confirm the linking code to WhatsApp (%w); run `bridged login` again", err)
			}
			fmt.Fprintln(opts.Out, "Code confirmed. Waiting for the phone to finish linking…")
		case whatsmeow.QRChannelEventError:
			if pe := lc.PasskeyFailure(); pe != nil {
				return passkeyError(pe.Error, pe.Continuation)
			}
			return fmt.Errorf("pairing failed: %w", item.Error)
		default:
			return fmt.Errorf("pairing failed: unexpected %q", item.Event)
		}
	}
}

// printQR draws code as a QR code the phone can scan.
func printQR(w io.Writer, code string, n int, valid time.Duration) {
	if n == 1 {
		fmt.Fprintln(w, "Open WhatsApp on your phone: Settings → Linked devices → Link a device, and scan this code:")
	} else {
		fmt.Fprintln(w, "\nThe previous code expired. Scan this one:")
	}
	renderQR(w, code)
	if valid > 0 {
		fmt.Fprintf(w, "(valid for %s)\n", valid.Round(time.Second))
	}
}

// renderQR writes code as half-block characters (two modules per line) with
// a quiet zone, which phones scan from a terminal.
func renderQR(w io.Writer, code string) {
	if len(code) > maxQRBytes {
		fmt.Fprintf(w, "(code too long to draw) %s\n", code)
		return
	}
	qrterminal.GenerateWithConfig(code, qrterminal.Config{
		Level:          qrterminal.L,
		Writer:         w,
		HalfBlocks:     true,
		BlackChar:      qrterminal.BLACK_BLACK,
		WhiteBlackChar: qrterminal.WHITE_BLACK,
		WhiteChar:      qrterminal.WHITE_WHITE,
		BlackWhiteChar: qrterminal.BLACK_WHITE,
		QuietZone:      qrterminal.QUIET_ZONE,
	})
}

func printPairingCode(w io.Writer, code string) {
	if len(code) == 8 {
		code = code[:4] + "-" + code[4:]
	}
	fmt.Fprintf(w, "Your pairing code: %s\n", code)
	fmt.Fprintln(w, "On your phone: WhatsApp → Settings → Linked devices → Link a device → Link with phone number instead, and type the code.")
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
