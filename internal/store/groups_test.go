package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAddGroup(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	cfg := ContainerConfig{
		ExtraMounts: []MountRequest{{HostPath: "/home/me/notes", ContainerPath: "notes", ReadWrite: true}},
		Timeout:     45 * time.Minute,
		Model:       "sonnet",
	}
	first, err := db.Groups.Add(ctx, Group{Chat: "1@g.us", Folder: "family", Trigger: "@Andy", RequiresTrigger: true, ContainerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if first.IsMain {
		t.Errorf("first group added is main; want main only when asked")
	}
	if _, err := db.Groups.Main(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("MainGroup with no main = %v; want ErrNotFound", err)
	}
	got, err := db.Groups.ByChat(ctx, "1@g.us")
	if err != nil {
		t.Fatal(err)
	}
	want := Group{Chat: "1@g.us", Name: "family", Folder: "family", Trigger: "@Andy", RequiresTrigger: true, ContainerConfig: cfg, Others: OthersContext, Tools: ToolsFull, CreatedAt: t0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetGroupByChat = %+v; want %+v", got, want)
	}
	if _, err := db.Chats.Get(ctx, "1@g.us"); err != nil {
		t.Errorf("registered chat missing from chats: %v", err)
	}

	if _, err := db.Groups.Add(ctx, Group{Chat: "local:main", Folder: "main", IsMain: true}); err != nil {
		t.Fatalf("add main: %v", err)
	}
	tests := []struct {
		name string
		g    Group
		want error
		msg  string
	}{
		{"second main", Group{Chat: "2@g.us", Folder: "other", IsMain: true}, ErrMainExists, `"main" is the main group`},
		{"folder taken", Group{Chat: "3@g.us", Folder: "family"}, ErrExists, `folder "family"`},
		{"chat taken", Group{Chat: "1@g.us", Folder: "family2"}, ErrExists, `registered as group "family"`},
		{"bad folder", Group{Chat: "4@g.us", Folder: "../x"}, ErrInvalidFolder, `"../x"`},
		{"reserved folder", Group{Chat: "4@g.us", Folder: "global"}, ErrInvalidFolder, "reserved"},
		{"no chat", Group{Folder: "nochat"}, ErrInvalid, "no chat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := db.Groups.Add(ctx, tt.g)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("AddGroup = %v; want %v mentioning %q", err, tt.want, tt.msg)
			}
		})
	}
	gs, err := db.Groups.List(ctx)
	if err != nil || len(gs) != 2 {
		t.Fatalf("ListGroups = %d groups, %v; want 2 (no refused one stored)", len(gs), err)
	}
	main, err := db.Groups.Main(ctx)
	if err != nil || main.Folder != "main" {
		t.Errorf("MainGroup = %+v, %v; want main", main, err)
	}
}

func TestUpdateAndRemoveGroup(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:main", "main")
	g := addGroup(t, db, "1@g.us", "family")
	if _, err := db.Groups.Add(ctx, Group{Chat: "9@g.us", Folder: "boss", IsMain: true}); err != nil {
		t.Fatal(err)
	}

	g.Name, g.RequiresTrigger, g.Trigger = "The Family", false, "@Bob"
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Groups.ByFolder(ctx, "family")
	if got.Name != "The Family" || got.RequiresTrigger || got.Trigger != "@Bob" || !got.CreatedAt.Equal(g.CreatedAt) {
		t.Errorf("after update %+v; want new name, trigger off, @Bob, same created-at", got)
	}
	g.IsMain = true
	if err := db.Groups.Update(ctx, g); !errors.Is(err, ErrMainExists) {
		t.Errorf("UpdateGroup to a second main = %v; want ErrMainExists", err)
	}
	g.IsMain, g.Chat = false, "local:main"
	if err := db.Groups.Update(ctx, g); !errors.Is(err, ErrExists) {
		t.Errorf("UpdateGroup to another group's chat = %v; want ErrExists", err)
	}
	if err := db.Groups.Update(ctx, Group{Chat: "5@g.us", Folder: "ghost"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateGroup(unknown) = %v; want ErrNotFound", err)
	}

	// Removing keeps the group's tasks and stops storing its chat's text.
	task, err := db.Tasks.Create(ctx, Task{Folder: "family", Chat: "1@g.us", Prompt: "p", Kind: "once", Value: "2026-12-01 09:00"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Groups.Remove(ctx, "family"); err != nil {
		t.Fatal(err)
	}
	if err := db.Groups.Remove(ctx, "family"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second RemoveGroup = %v; want ErrNotFound", err)
	}
	if _, err := db.Groups.ByFolder(ctx, "family"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetGroupByFolder(removed) = %v; want ErrNotFound", err)
	}
	if _, err := db.Tasks.Get(ctx, task.ID); err != nil {
		t.Errorf("task of the removed group: %v; want it kept", err)
	}
	if _, inserted, _ := db.Messages.Insert(ctx, Message{Chat: "1@g.us", ExternalID: "Z", Text: "hello"}); inserted {
		t.Errorf("message of a removed group stored; want only metadata")
	}
}

func TestContainerConfigJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    ContainerConfig
		wantErr string
	}{
		{`{}`, ContainerConfig{}, ""},
		{`{"timeout":"1h30m","model":"opus"}`, ContainerConfig{Timeout: 90 * time.Minute, Model: "opus"}, ""},
		{`{"timeout":"90"}`, ContainerConfig{}, `invalid timeout "90"`},
		{`{"timeout":"-1m"}`, ContainerConfig{}, `invalid timeout "-1m"`},
		{`{"colour":"red"}`, ContainerConfig{}, `unknown field "colour"`},
	}
	for _, tt := range tests {
		var got ContainerConfig
		err := json.Unmarshal([]byte(tt.in), &got)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Unmarshal(%s) = %v; want error containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		b, _ := json.Marshal(got)
		var back ContainerConfig
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %s via %s = %+v, %v", tt.in, b, back, err)
		}
	}
}

// The registry in memory follows every committed change, through DB and
// Tx alike, and a rolled-back change leaves it as it was.
func TestRegistryFollowsChanges(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if gs, err := db.Groups.List(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("ListGroups = %v, %v; want none", gs, err)
	}
	if _, err := db.Groups.Add(ctx, Group{Chat: "c1", Folder: "one", Trigger: "@A"}); err != nil {
		t.Fatal(err)
	}
	if g, err := db.Groups.ByChat(ctx, "c1"); err != nil || g.Folder != "one" {
		t.Fatalf("GetGroupByChat after add = %+v, %v", g, err)
	}
	g, _ := db.Groups.ByFolder(ctx, "one")
	g.Trigger = "@B"
	g.ContainerConfig.ExtraMounts = []MountRequest{{HostPath: "/x", ContainerPath: "x"}}
	g.Allow = []string{AllowAdmins}
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.Groups.Update(ctx, g) }); err != nil {
		t.Fatal(err)
	}
	got, err := db.Groups.ByFolder(ctx, "one")
	if err != nil || got.Trigger != "@B" || len(got.ContainerConfig.ExtraMounts) != 1 {
		t.Fatalf("after update = %+v, %v; want trigger @B and one mount", got, err)
	}
	got.ContainerConfig.ExtraMounts[0].HostPath = "/changed"
	got.Allow[0] = "changed"
	if again, _ := db.Groups.ByFolder(ctx, "one"); again.ContainerConfig.ExtraMounts[0].HostPath != "/x" || again.Allow[0] != AllowAdmins {
		t.Fatal("a caller's change to a returned group reached the registry")
	}
	boom := errors.New("boom")
	if err := db.Tx(ctx, func(tx *Tx) error {
		if err := tx.Groups.Remove(ctx, "one"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled-back remove = %v", err)
	}
	if _, err := db.Groups.ByFolder(ctx, "one"); err != nil {
		t.Fatalf("a rolled-back remove reached the registry: %v", err)
	}
	if err := db.Groups.Remove(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Groups.ByChat(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetGroupByChat after remove = %v; want ErrNotFound", err)
	}
	if _, err := db.Groups.Main(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("MainGroup = %v; want ErrNotFound", err)
	}
}
