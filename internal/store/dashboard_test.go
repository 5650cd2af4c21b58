package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// The dashboard's figures: the latest messages, messages by hour, turn
// latencies and the ledger's cost by hour.
func TestDashboardFigures(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:a", Folder: "a", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	var last store.MessageID
	for i, m := range []store.Message{
		{ExternalID: "1", Text: "one", SentAt: hour.Add(time.Minute)},
		{ExternalID: "2", Text: "two", SentAt: hour.Add(2 * time.Minute), IsBot: true},
		{ExternalID: "3", Text: "three", SentAt: hour.Add(time.Hour + time.Minute)},
	} {
		m.Chat = "local:a"
		id, _, err := db.Messages.Insert(ctx, m)
		if err != nil {
			t.Fatal(i, err)
		}
		last = id
	}
	ms, err := db.Messages.Recent(ctx, "local:a", 2)
	if err != nil || len(ms) != 2 || ms[0].Text != "two" || ms[1].Text != "three" {
		t.Fatalf("recent: %+v %v; want two, three", ms, err)
	}
	hs, err := db.Messages.ByHour(ctx, "", hour)
	if err != nil || len(hs) != 2 || hs[0].In != 1 || hs[0].Out != 1 || hs[1].In != 1 || !hs[0].Hour.Equal(hour) {
		t.Fatalf("by hour: %+v %v", hs, err)
	}
	if err := db.Turns.Add(ctx, store.TurnEnd{Chat: "local:a", Upto: last, Result: "done"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Turns.Add(ctx, store.TurnEnd{Chat: "local:a", Upto: last, Result: "failed"}); err != nil {
		t.Fatal(err)
	}
	ls, err := db.Turns.Latencies(ctx, "local:a", hour, 10)
	if err != nil || len(ls) != 1 || ls[0].Latency < 0 || ls[0].Latency > time.Minute {
		t.Fatalf("latencies: %+v %v; want the one answered turn", ls, err)
	}
	for _, u := range []store.APIUsage{{Folder: "a", At: hour.Add(time.Minute), CostUSD: 0.5}, {Folder: "a", At: hour.Add(3 * time.Minute), CostUSD: 0.25}, {Folder: "b", At: hour.Add(time.Hour), CostUSD: 1}} {
		if err := db.Usage.AddAPI(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := db.Usage.CostByHour(ctx, hour)
	if err != nil || len(cs) != 2 || cs[0].Folder != "a" || cs[0].CostUSD != 0.75 || !cs[0].Hour.Equal(hour) || cs[1].Folder != "b" {
		t.Fatalf("cost by hour: %+v %v", cs, err)
	}
}
