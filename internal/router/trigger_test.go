package router

import (
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

func TestTriggered(t *testing.T) {
	h := newHarness(t, nil)
	msg := func(id int, text string, bot bool) store.Message {
		return store.Message{ID: store.MessageID(id), Chat: famChat, Text: text, IsBot: bot}
	}
	fam := store.Group{Chat: famChat, Folder: "fam", Trigger: "@" + testName, RequiresTrigger: true}
	custom := fam
	custom.Trigger = "@Helper"
	noTrigger := fam
	noTrigger.Trigger = ""
	main := fam
	main.IsMain = true
	open := fam
	open.RequiresTrigger = false

	tests := []struct {
		name string
		g    store.Group
		msgs []store.Message
		want bool
	}{
		{"main answers everything", main, []store.Message{msg(1, "hello", false)}, true},
		{"requires-trigger off answers everything", open, []store.Message{msg(1, "hello", false)}, true},
		{"no trigger", fam, []store.Message{msg(1, "hello", false)}, false},
		{"trigger at start", fam, []store.Message{msg(1, "hello", false), msg(2, "@robo what now", false)}, true},
		{"trigger mid-sentence", fam, []store.Message{msg(1, "ask @"+testName+" later", false)}, false},
		{"trigger glued to a word", fam, []store.Message{msg(1, "@"+testName+"x hi", false)}, false},
		{"bot message never triggers", fam, []store.Message{msg(1, "@"+testName+" hi", true)}, false},
		{"mention triggers", fam, []store.Message{{ID: 7, Chat: famChat, Text: "hey you", Mentioned: true}}, true},
		{"a bot's mention never triggers", fam, []store.Message{{ID: 8, Chat: famChat, Text: "hey you", Mentioned: true, IsBot: true}}, false},
		{"group's own trigger", custom, []store.Message{msg(1, "@helper hi", false)}, true},
		{"group's own trigger replaces the name", custom, []store.Message{msg(1, "@"+testName+" hi", false)}, false},
		{"a sender not allowed never triggers", main, []store.Message{{ID: 9, Chat: famChat, Text: "hello", NotAllowed: true}}, false},
		{"a sender not allowed is context for one who is", open, []store.Message{{ID: 10, Chat: famChat, Text: "hi", NotAllowed: true}, msg(11, "and me", false)}, true},
		{"empty trigger defaults to the name", noTrigger, []store.Message{msg(1, "@"+testName+" hi", false)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.r.triggered(tt.g, tt.msgs); got != tt.want {
				t.Fatalf("triggered: got %v; want %v", got, tt.want)
			}
		})
	}
}
