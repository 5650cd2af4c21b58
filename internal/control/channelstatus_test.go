package control

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
)

// status --json carries the channel's health and each condition with its
// end, so a script can tell restricted-until from stable.
func TestChannelStatusJSONCarriesHealth(t *testing.T) {
	ends := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cs := channelStatus("whatsapp", channel.Status{
		State: channel.StateConnected, Health: channel.HealthRestricted,
		Conditions: []channel.Condition{{Key: "reachout-timelock", Health: channel.HealthRestricted, Text: "restricted", Until: ends}},
	})
	b, err := json.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"health":"restricted"`, `"key":"reachout-timelock"`, `"until":"2026-11-29T10:00:00Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
}
