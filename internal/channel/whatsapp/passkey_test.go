package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
)

// passkeyRequest is the request as whatsmeow parses it from WhatsApp's
// <passkey_request_options> (WebAuthn's PublicKeyCredentialRequestOptions).
func passkeyRequest(t *testing.T) whatsmeow.QRChannelItem {
	t.Helper()
	var pk types.WebAuthnPublicKey
	raw := `{"challenge":"Y2hhbGxlbmdl","timeout":60000,"rpId":"whatsapp.com",
		"allowCredentials":[{"id":"Y3JlZGVudGlhbA","type":"public-key","transports":["hybrid","internal"]}],
		"userVerification":"required","extensions":{}}`
	if err := json.Unmarshal([]byte(raw), &pk); err != nil {
		t.Fatal(err)
	}
	return whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventPasskeyRequest, PasskeyRequest: &events.PairPasskeyRequest{PublicKey: &pk}}
}

// passkeyConfirmation is what whatsmeow's QR channel hands on when the
// code must be shown (SkipHandoffUX false; with it set, whatsmeow confirms
// by itself and nothing reaches bridged).
func passkeyConfirmation() whatsmeow.QRChannelItem {
	return whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventPasskeyResponse,
		PasskeyConfirmation: &events.PairPasskeyConfirmation{Code: "7KQ2-M9XD"}}
}

// TestLoginPasskeyGolden runs the passkey step in the QR and the
// phone-number flows and compares the terminal's output with
// testdata/passkey-<name>.golden (go test -run TestLoginPasskeyGolden -update
// rewrites them).
func TestLoginPasskeyGolden(t *testing.T) {
	tests := []struct {
		name     string
		phone    string
		items    func(t *testing.T) []whatsmeow.QRChannelItem
		typed    string
		wantErr  error
		confirms int
	}{
		{name: "qr-confirmed", items: func(*testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyConfirmation(), whatsmeow.QRChannelSuccess}
		}, typed: "yes\n", confirms: 1},
		{name: "qr-refused", items: func(*testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyConfirmation(), whatsmeow.QRChannelSuccess}
		}, typed: "no\n", wantErr: ErrPasskeyNotConfirmed},
		{name: "qr-passkey-asked", items: func(t *testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyRequest(t)}
		}, wantErr: ErrPasskeyRequired},
		{name: "phone-confirmed", phone: "+49 170 0000001", items: func(*testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyConfirmation(), whatsmeow.QRChannelSuccess}
		}, typed: "y\n", confirms: 1},
		{name: "phone-refused", phone: "+49 170 0000001", items: func(*testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyConfirmation(), whatsmeow.QRChannelSuccess}
		}, typed: "\n", wantErr: ErrPasskeyNotConfirmed},
		{name: "phone-passkey-asked", phone: "+49 170 0000001", items: func(t *testing.T) []whatsmeow.QRChannelItem {
			return []whatsmeow.QRChannelItem{code(testQRCode), passkeyRequest(t)}
		}, wantErr: ErrPasskeyRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			f := feed(tt.items(t)...)
			err := login(context.Background(), f, LoginOptions{Out: &out, In: strings.NewReader(tt.typed), Phone: tt.phone})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("login: err = %v; want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "bridged login") {
				t.Errorf("error %q does not say what to do", err)
			}
			if f.confirms != tt.confirms {
				t.Errorf("passkey confirmations sent = %d; want %d", f.confirms, tt.confirms)
			}
			golden := filepath.Join("testdata", "passkey-"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("output differs from %s:\n%s", golden, out.String())
			}
		})
	}
}

// A passkey error says which step failed and what to try; the QR channel
// reports it as a plain error, and the login's own handler kept which.
func TestLoginPasskeyError(t *testing.T) {
	for _, continuation := range []bool{false, true} {
		f := feed(code(testQRCode), whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventError, Error: errors.New("failed to send companion nonce: timed out")})
		f.passkeyErr = &events.PairPasskeyError{Error: errors.New("failed to send companion nonce: timed out"), Continuation: continuation}
		err := login(context.Background(), f, LoginOptions{Out: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), "companion nonce") || !strings.Contains(err.Error(), "Passkeys") ||
			!strings.Contains(err.Error(), "bridged login") {
			t.Errorf("continuation %v: err = %v; want what failed and what to try", continuation, err)
		}
		if continuation && !strings.Contains(err.Error(), "phone's answer") {
			t.Errorf("continuation: err = %v; want it to name the phone's answer", err)
		}
	}
}

// Connecting and the first code are bounded by 30 s each, and so is the
// request for a pairing code; the login's own (longer) timeout does not
// apply to them.
func TestLoginConnectAndPairTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := login(context.Background(), &fakeLogin{items: make(chan whatsmeow.QRChannelItem), hang: true}, LoginOptions{Out: &bytes.Buffer{}})
		if !errors.Is(err, ErrConnectTimeout) || time.Since(start) != loginConnectTimeout {
			t.Errorf("connect that hangs: %v after %s; want ErrConnectTimeout after %s", err, time.Since(start), loginConnectTimeout)
		}

		start = time.Now()
		err = login(context.Background(), &fakeLogin{items: make(chan whatsmeow.QRChannelItem)}, LoginOptions{Out: &bytes.Buffer{}})
		if !errors.Is(err, ErrConnectTimeout) || time.Since(start) != loginPairTimeout {
			t.Errorf("no first code: %v after %s; want ErrConnectTimeout after %s", err, time.Since(start), loginPairTimeout)
		}

		start = time.Now()
		f := feed(code(testQRCode))
		f.hang = true
		f.items = make(chan whatsmeow.QRChannelItem, 1)
		f.items <- code(testQRCode)
		err = login(context.Background(), &phoneOnlyHang{f}, LoginOptions{Out: &bytes.Buffer{}, Phone: "491700000001"})
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != loginPairTimeout {
			t.Errorf("pairing code that never comes: %v after %s; want a deadline after %s", err, time.Since(start), loginPairTimeout)
		}
	})
}

// phoneOnlyHang connects at once; only PairPhone hangs.
type phoneOnlyHang struct{ *fakeLogin }

func (phoneOnlyHang) Connect(context.Context) error { return nil }
