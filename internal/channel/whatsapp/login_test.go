package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types/events"
	"rsc.io/qr"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// A code shaped like WhatsApp's: ref, noise key, identity key, adv secret.
const testQRCode = "2@Y2hhbmdlbWVjaGFuZ2VtZWNoYW5nZW1lY2hhbmdlbWU=,J8Yx0cQ0pCq3x3o1I4Kz3i3u8b6u1l8f7KcA1q0n9Vs=," +
	"p3Zk2r0K4m7E3v8y1bQ9w6T2u5Z0a8c4d7e1f3g6h9j=,Qm9yZ2VkIGJ5IGJyaWRnZWQgdGVzdHMgb25seSBub3QgcmVhbA=="

type fakeLogin struct {
	items      chan whatsmeow.QRChannelItem
	pairCalls  []string
	connected  bool
	confirms   int                      // SendPasskeyConfirmation calls
	passkeyErr *events.PairPasskeyError // what PasskeyFailure reports
	hang       bool                     // Connect and PairPhone wait for their context
}

func (f *fakeLogin) QRChannel(context.Context) (<-chan whatsmeow.QRChannelItem, error) {
	return f.items, nil
}
func (f *fakeLogin) Connect(ctx context.Context) error {
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}
func (f *fakeLogin) PairPhone(ctx context.Context, phone string) (string, error) {
	f.pairCalls = append(f.pairCalls, phone)
	if f.hang {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return "ABCD1234", nil
}
func (f *fakeLogin) WaitConnected(context.Context) bool { return f.connected }
func (f *fakeLogin) SendPasskeyConfirmation(context.Context) error {
	f.confirms++
	return nil
}
func (f *fakeLogin) PasskeyFailure() *events.PairPasskeyError { return f.passkeyErr }

func feed(items ...whatsmeow.QRChannelItem) *fakeLogin {
	ch := make(chan whatsmeow.QRChannelItem, len(items))
	for _, it := range items {
		ch <- it
	}
	close(ch)
	return &fakeLogin{items: ch, connected: true}
}

func code(c string) whatsmeow.QRChannelItem {
	return whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventCode, Code: c, Timeout: 60 * time.Second}
}

func TestQRRenderingGolden(t *testing.T) {
	var out bytes.Buffer
	renderQR(&out, testQRCode)
	golden := filepath.Join("testdata", "qr.golden")
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
		t.Errorf("rendered QR differs from %s:\n%s", golden, out.String())
	}
}

// TestQRRenderingIsScannable reads the half-block drawing back into modules
// and compares them with the QR code's own matrix: what the terminal shows is
// exactly the code, with a light quiet zone around it.
func TestQRRenderingIsScannable(t *testing.T) {
	var out bytes.Buffer
	renderQR(&out, testQRCode)
	enc, err := qr.Encode(testQRCode, qr.L)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	// Each character holds two modules, top and bottom; true means dark.
	cell := map[rune][2]bool{'█': {false, false}, ' ': {true, true}, '▀': {false, true}, '▄': {true, false}}
	const quiet = 4
	dark := func(x, y int) (bool, bool) {
		row := []rune(lines[(y+quiet)/2])
		if x+quiet >= len(row) {
			return false, false
		}
		c, ok := cell[row[x+quiet]]
		if !ok {
			return false, false
		}
		return c[(y+quiet)%2], true
	}
	for y := -quiet; y < enc.Size+quiet; y++ {
		for x := -1; x < enc.Size+1; x++ {
			want := x >= 0 && y >= 0 && x < enc.Size && y < enc.Size && enc.Black(x, y)
			got, ok := dark(x, y)
			if !ok && y >= 0 && y < enc.Size {
				t.Fatalf("module (%d,%d) missing from the drawing", x, y)
			}
			if ok && got != want {
				t.Fatalf("module (%d,%d) dark = %v; want %v", x, y, got, want)
			}
		}
	}
}

func TestLoginQR(t *testing.T) {
	tests := []struct {
		name    string
		items   []whatsmeow.QRChannelItem
		wantErr error
		wantOut []string
	}{
		{name: "scanned", items: []whatsmeow.QRChannelItem{code(testQRCode), code(testQRCode + "x"), whatsmeow.QRChannelSuccess},
			wantOut: []string{"Link a device", "The previous code expired", "WhatsApp is paired"}},
		{name: "nobody scanned", items: []whatsmeow.QRChannelItem{code(testQRCode), whatsmeow.QRChannelTimeout},
			wantErr: ErrLoginTimeout},
		{name: "client outdated", items: []whatsmeow.QRChannelItem{whatsmeow.QRChannelClientOutdated},
			wantErr: ErrClientOutdated},
		{name: "channel closed", items: nil, wantErr: ErrLoginTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := login(context.Background(), feed(tt.items...), LoginOptions{Out: &out})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("login: err = %v; want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "bridged") {
				t.Errorf("error %q does not say what to do", err)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.name == "scanned" {
				var one bytes.Buffer
				renderQR(&one, testQRCode)
				if !strings.Contains(out.String(), one.String()) {
					t.Errorf("output does not contain the drawn QR code")
				}
			}
		})
	}
}

func TestLoginTimesOut(t *testing.T) {
	never := &fakeLogin{items: make(chan whatsmeow.QRChannelItem)}
	err := login(context.Background(), never, LoginOptions{Out: &bytes.Buffer{}, Timeout: 10 * time.Millisecond})
	if !errors.Is(err, ErrLoginTimeout) {
		t.Errorf("login: err = %v; want ErrLoginTimeout", err)
	}
}

func TestLoginWithPhoneNumber(t *testing.T) {
	var out bytes.Buffer
	f := feed(code(testQRCode), code(testQRCode+"x"), whatsmeow.QRChannelSuccess)
	if err := login(context.Background(), f, LoginOptions{Out: &out, Phone: "+49 170 0000001"}); err != nil {
		t.Fatalf("login: %v", err)
	}
	if len(f.pairCalls) != 1 || f.pairCalls[0] != "491700000001" {
		t.Errorf("PairPhone calls = %q; want one with 491700000001", f.pairCalls)
	}
	if !strings.Contains(out.String(), "ABCD-1234") {
		t.Errorf("output lacks the pairing code ABCD-1234:\n%s", out.String())
	}
	if strings.Contains(out.String(), "█") {
		t.Errorf("phone pairing drew a QR code:\n%s", out.String())
	}
	if err := login(context.Background(), feed(), LoginOptions{Out: &out, Phone: "12"}); err == nil {
		t.Errorf("login with phone %q: err = nil; want a clear error", "12")
	}
}
