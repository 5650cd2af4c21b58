package container

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// groupUIDBuilder is a SpecBuilder that gives each group its own uid, on
// e's engine (its id mappings), in a home e can mount from.
func groupUIDBuilder(t *testing.T, e *testEngine) SpecBuilder {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: a uid per group needs a daemon that can give directories away (root); these tests run as uid ", os.Geteuid())
	}
	b := newBuilder(t)
	b.Image = ensureEchoImage(t, e.d)
	b.Limits = e.limits(t, b.Limits)
	b.UIDMap, b.GIDMap = e.info.UIDMap, e.info.GIDMap
	uids, err := home.OpenGroupUIDs(b.Home.Layout(), b.UID)
	if err != nil {
		t.Fatal(err)
	}
	b.GroupUIDs = uids
	return b
}

// Every group's agent runs as a uid of its own, which owns the group's
// directories. An agent given groups/ itself read-write (no mount gives it
// that; here the kernel alone stands in the way) can write its own folder
// but neither rename a sibling's folder nor plant a link, a directory or a
// file in groups/, nor write into the sibling's folder: each is refused by
// the kernel (EACCES). The daemon still reads and removes what the agent
// wrote.
func TestDockerGroupUIDsKernelRefusesSiblings(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		b := groupUIDBuilder(t, e)
		l := b.Home.Layout()
		build := func(folder, prompt string) Spec {
			t.Helper()
			g := store.Group{Chat: store.ChatID("local:" + folder), Name: folder, Folder: store.Folder(folder)}
			spec, release, err := b.Build(zerolog.Nop(), g, uniqueName(t), ipc.RunInput{
				Prompt: prompt, Group: folder, Chat: "local:" + folder, AssistantName: "Robo", Timezone: "UTC",
			})
			if err != nil {
				t.Fatal(err)
			}
			release()
			return spec
		}
		_ = build("friends", "hi")
		g := "/workspace/allgroups"
		spec := build("family", "id\n"+
			"write /workspace/group/mine.txt\n"+
			"rename "+g+"/friends "+g+"/stolen\n"+
			"symlink ../store "+g+"/evil\n"+
			"write "+g+"/planted.txt\n"+
			"write "+g+"/friends/from-family.txt\n")
		e.share(t, l.Dir)
		familyUID, _ := b.GroupUIDs.UID("family")
		friendsUID, _ := b.GroupUIDs.UID("friends")
		if familyUID == friendsUID || familyUID == b.UID || spec.User != UserSpec(familyUID, familyUID) {
			t.Fatalf("uids family %d, friends %d, base %d, spec user %q; want one uid per group above the base", familyUID, friendsUID, b.UID, spec.User)
		}
		spec.Mounts = append(spec.Mounts, Mount{Source: l.GroupsDir(), Target: g})
		se := &stderrLines{}
		spec.Stderr = se.add
		run := start(t, e.d, spec)
		for range run.Events() {
		}
		if exit := waitExit(t, run, 30*time.Second); exit.Code != 0 {
			t.Fatalf("exit %+v (stderr %q); want 0", exit, se.all())
		}
		lines := se.all()
		for _, want := range []string{
			fmt.Sprintf("uid=%d gid=%d", familyUID, familyUID),
			"wrote /workspace/group/mine.txt",
			"cannot rename " + g + "/stolen: EACCES",
			"cannot symlink " + g + "/evil: EACCES",
			"cannot write " + g + "/planted.txt",
			"cannot write " + g + "/friends/from-family.txt",
		} {
			if !slices.Contains(lines, want) {
				t.Errorf("stderr %q; want %q", lines, want)
			}
		}
		for _, p := range []string{"stolen", "evil", "planted.txt", "friends/from-family.txt"} {
			if _, err := os.Lstat(filepath.Join(l.GroupsDir(), p)); err == nil {
				t.Errorf("groups/%s exists; the agent changed what is not its own", p)
			}
		}
		mine := filepath.Join(l.GroupDir("family"), "mine.txt")
		var st syscall.Stat_t
		hostUID, _ := HostID(e.info.UIDMap, familyUID)
		if err := syscall.Lstat(mine, &st); err != nil || int(st.Uid) != hostUID {
			t.Errorf("the agent's file: %v, owner %d; want it owned by the group's host uid %d", err, st.Uid, hostUID)
		}
		if data, err := os.ReadFile(mine); err != nil || string(data) != "written by echoagent" {
			t.Errorf("the daemon reads the agent's file: %q, %v", data, err)
		}
		if err := os.Remove(mine); err != nil {
			t.Errorf("the daemon removes the agent's file: %v", err)
		}
	})
}

// A home whose group directories belong to the one uid every agent shared
// (BRIDGED_CONTAINER_UID) is moved over at the next start of each group:
// its folder, Claude state and IPC namespace, with everything in them, go
// to the group's own uid, which is written down and kept; groups/ becomes
// only searchable.
func TestGroupUIDsMigrateAnOldHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: a uid per group needs a daemon that can give directories away (root); these tests run as uid ", os.Geteuid())
	}
	b := newBuilder(t)
	l := b.Home.Layout()
	g := store.Group{Chat: "local:family", Name: "Family", Folder: "family"}
	// The old home: everything given to the shared uid, groups/ listable.
	if err := b.Prepare(g); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(l.GroupDir("family"), "notes", "old.txt")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{l.GroupDir("family"), l.ClaudeDir("family"), l.IPCDir("family")} {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, b.UID, b.GID)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(l.GroupsDir(), 0o755); err != nil {
		t.Fatal(err)
	}

	// The new daemon.
	h, err := home.New(l.Dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	b.Home = h
	if b.GroupUIDs, err = home.OpenGroupUIDs(l, b.UID); err != nil {
		t.Fatal(err)
	}
	if err := b.Prepare(g); err != nil {
		t.Fatal(err)
	}
	uid, err := b.GroupUIDs.UID("family")
	if err != nil || uid != b.UID+1 {
		t.Fatalf("family's uid %d, %v; want %d", uid, err, b.UID+1)
	}
	for _, p := range []string{l.GroupDir("family"), filepath.Dir(old), old, l.ClaudeDir("family"), filepath.Join(l.ClaudeDir("family"), SettingsName), filepath.Join(l.IPCDir("family"), ipc.RequestsDir)} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || int(st.Uid) != uid || int(st.Gid) != uid {
			t.Errorf("%s: %v, owner %d:%d; want %d:%d", p, err, st.Uid, st.Gid, uid, uid)
		}
	}
	if fi, err := os.Stat(l.GroupsDir()); err != nil || fi.Mode().Perm() != home.GroupsDirMode {
		t.Errorf("groups/: %v, %v; want mode %o", fi.Mode(), err, home.GroupsDirMode)
	}
	// Kept across restarts, and never given to another group.
	again, err := home.OpenGroupUIDs(l, b.UID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.UID("family"); got != uid {
		t.Errorf("family's uid after a restart: %d; want %d", got, uid)
	}
	if got, _ := again.UID("friends"); got != uid+1 {
		t.Errorf("a new group's uid: %d; want %d", got, uid+1)
	}
}
