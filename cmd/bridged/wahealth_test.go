package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/store"
)

// STATUS= says when a connected WhatsApp is not stable: flapping, the
// phone offline, the app state out of sync, or restricted until when.
func TestStatusLineHealth(t *testing.T) {
	ends := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		wa   channel.Status
		want string
	}{
		{channel.Status{State: channel.StateConnected, Health: channel.HealthStable}, "WhatsApp connected; 0 containers running"},
		{channel.Status{State: channel.StateConnected, Health: channel.HealthFlapping,
			Conditions: []channel.Condition{{Key: "flapping", Health: channel.HealthFlapping}}},
			"WhatsApp connected but flapping; 0 containers running"},
		{channel.Status{State: channel.StateConnected, Health: channel.HealthRestricted,
			Conditions: []channel.Condition{{Key: "reachout-timelock", Health: channel.HealthRestricted, Until: ends}}},
			"WhatsApp connected but restricted until 2026-11-29 10:00 UTC; 0 containers running"},
		{channel.Status{State: channel.StateConnected, Health: channel.HealthPhoneOffline,
			Conditions: []channel.Condition{{Key: "phone-offline", Health: channel.HealthPhoneOffline}}},
			"WhatsApp connected but phone-offline; 0 containers running"},
		{channel.Status{State: channel.StateConnected, Health: channel.HealthAppStateSync,
			Conditions: []channel.Condition{{Key: "app-state", Health: channel.HealthAppStateSync}}},
			"WhatsApp connected but app-state-sync; 0 containers running"},
		{channel.Status{State: channel.StateBanned, Health: channel.HealthBanned, Detail: "WhatsApp temporarily banned this account"},
			"WhatsApp temporarily-banned (WhatsApp temporarily banned this account); 0 containers running"},
	} {
		if got := statusLine(tt.wa, router.Status{}); got != tt.want {
			t.Errorf("statusLine = %q; want %q", got, tt.want)
		}
	}
}

// `bridged status` shows the health next to the state and lists each
// condition with its end.
func TestStatusShowsConditions(t *testing.T) {
	ends := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	st := control.Status{Running: true, Timezone: "UTC", Channels: []control.ChannelStatus{{
		Name: "whatsapp", State: "connected", Health: "restricted",
		Conditions: []control.ChannelCondition{{Key: "reachout-timelock", Health: "restricted", Until: ends,
			Text: "WhatsApp restricts this account from messaging new contacts until 2026-11-29 10:00 UTC."}},
	}}}
	var out strings.Builder
	printStatus(&out, st, &config.Config{Timezone: time.UTC})
	for _, want := range []string{"connected but restricted until 2026-11-29 10:00 UTC", "whatsapp reachout-timelock", "until 2026-11-29 10:00", "messaging new contacts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// The sink says a chat wrote before only when a message from it is
// stored; the account's own messages do not count.
func TestWhatsAppSinkContactHistory(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	s := waSink{db: db}
	for i, chat := range []store.ChatID{"491700000002@s.whatsapp.net", "491700000009@s.whatsapp.net", "491700000010@s.whatsapp.net"} {
		if _, err := db.Groups.Add(ctx, store.Group{Chat: chat, Folder: store.Folder("dm" + string(rune('a'+i))), Trigger: "@Andy"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []store.Message{
		{Chat: "491700000002@s.whatsapp.net", ExternalID: "A1", Sender: "491700000002@s.whatsapp.net", Text: "hi", SentAt: time.Now()},
		{Chat: "491700000009@s.whatsapp.net", ExternalID: "B1", Sender: "491700000001@s.whatsapp.net", Text: "hello?", SentAt: time.Now(), FromMe: true},
	} {
		if _, _, err := db.Messages.Insert(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if !s.HasHistory(ctx, "491700000002@s.whatsapp.net") {
		t.Error("a contact that wrote: no history; want history")
	}
	for _, chat := range []string{"491700000009@s.whatsapp.net", "491700000010@s.whatsapp.net"} {
		if s.HasHistory(ctx, chat) {
			t.Errorf("%s never wrote: history; want none", chat)
		}
	}
}
