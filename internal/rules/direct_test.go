package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

func TestMayDirect(t *testing.T) {
	main := func(p store.ToolProfile) store.Group { return store.Group{Folder: "main", IsMain: true, Tools: p} }
	tests := []struct {
		name   string
		by     store.Group
		target store.Folder
		ok     bool
	}{
		{"itself, read-only", main(store.ToolsReadOnly), "main", true},
		{"another, full", main(store.ToolsFull), "fam", true},
		{"another, empty is full", main(""), "fam", true},
		{"another, ask", main(store.ToolsAsk), "fam", false},
		{"another, read-only", main(store.ToolsReadOnly), "fam", false},
		{"another, chat", main(store.ToolsChat), "fam", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := MayDirect(tt.by, tt.target, "schedule a task")
			if (err == nil) != tt.ok {
				t.Fatalf("MayDirect = %v; want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrLesserProfile) || !strings.Contains(err.Error(), "tool profile is "+string(tt.by.Tools)) ||
				!strings.Contains(err.Error(), "nothing was done")) {
				t.Errorf("MayDirect = %q; want an ErrLesserProfile naming the profile", err)
			}
		})
	}
}

func TestTaskMayRun(t *testing.T) {
	task := func(by store.Folder) store.Task { return store.Task{ID: "task-1", Folder: "fam", PromptBy: by} }
	full := &store.Group{Folder: "main", Tools: store.ToolsFull}
	ro := &store.Group{Folder: "main", Tools: store.ToolsReadOnly}
	tests := []struct {
		name   string
		t      store.Task
		setter *store.Group
		want   string // "" when it may run
	}{
		{"the owner's", task(""), nil, ""},
		{"its own group's", task("fam"), nil, ""},
		{"a full group's", task("main"), full, ""},
		{"a read-only group's", task("main"), ro, "profile is now read-only"},
		{"a removed group's", task("main"), nil, "no longer registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := TaskMayRun(tt.t, tt.setter)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("TaskMayRun = %v; want nil", err)
			case tt.want != "" && (!errors.Is(err, ErrLesserProfile) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "bridged tasks resume task-1")):
				t.Fatalf("TaskMayRun = %v; want an ErrLesserProfile saying %q and how to resume", err, tt.want)
			}
		})
	}
}
