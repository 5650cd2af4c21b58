package container

// The engine resolves a bind source when it starts the container, after the
// daemon checked it (issue 20, finding 7): Start confirms that each mount
// is the file that was checked and stops the container otherwise.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// A group's folder swapped for a link to the home's store/ between the
// check (SpecBuilder.CheckMounts) and the start: the engine mounts the
// store, Start sees it, stops the container before its input reaches it,
// logs why and returns ErrMountChanged. The same spec, not swapped, runs.
func TestDockerStartStopsSwappedMount(t *testing.T) {
	forEngines(t, testStopsSwappedMount)
}

// The same, with the mounts confirmed from the runner's report, as a daemon
// does that is neither root nor rootless and runs its agents as other uids
// (docs/decisions.md, record 44): the test process is root, so the Docker
// runtime is told it is another user (whose uid no container runs as).
func TestDockerStartStopsSwappedMountByReport(t *testing.T) {
	t.Parallel()
	e := newEngine(t, EngineDocker)
	if e.info.Rootless {
		t.Skip("SKIPPING: Docker is rootless here, whose user reads /proc/<pid>/root itself")
	}
	e.d.euid = 4242
	testStopsSwappedMount(t, e)
	if n := strings.Count(e.logs.String(), "bind mounts confirmed from the runner's report"); n != 1 {
		t.Errorf("%d starts confirmed their mounts from the runner's report; want the one not swapped (logs %s)", n, e.logs)
	}
}

func testStopsSwappedMount(t *testing.T, e *testEngine) {
	d, logs := e.d, e.logs
	image := ensureEchoImage(t, d)
	b := newBuilder(t)
	b.Image = image
	b.Limits = e.limits(t, b.Limits)
	b.UIDMap, b.GIDMap = e.info.UIDMap, e.info.GIDMap
	l := b.Home.Layout()
	g := store.Group{Chat: "local:fam", Name: "Family", Folder: "fam"}
	build := func(prompt string) Spec {
		t.Helper()
		spec, release, err := b.Build(zerolog.Nop(), g, uniqueName(t), ipc.RunInput{
			Prompt: prompt, Group: "fam", Chat: "local:fam", AssistantName: "Robo", Timezone: "UTC",
		})
		if err != nil {
			t.Fatal(err)
		}
		release()
		e.share(t, l.Dir)
		if err := b.CheckMounts(&spec); err != nil {
			t.Fatal(err)
		}
		for _, m := range spec.Mounts {
			if m.ID.IsZero() {
				t.Fatalf("CheckMounts left the mount %s without its source's device and inode", m.Target)
			}
		}
		return spec
	}

	// Not swapped: every mount is what was checked.
	spec := build("write /workspace/group/ok.txt")
	se := &stderrLines{}
	spec.Stderr = se.add
	run := start(t, d, spec)
	for range run.Events() {
	}
	if exit := waitExit(t, run, 30*time.Second); exit.Code != 0 {
		t.Fatalf("exit %+v; want 0", exit)
	}
	if _, err := os.Stat(filepath.Join(l.GroupDir("fam"), "ok.txt")); err != nil {
		t.Fatalf("the run with its mounts as checked did not write its folder: %v (stderr %q)", err, se.all())
	}

	// Checked, then swapped.
	if err := os.WriteFile(filepath.Join(l.StoreDir(), "bridged.db"), []byte("the database"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec = build("write /workspace/group/pwned.txt")
	dir := l.GroupDir("fam")
	if err := os.Rename(dir, dir+".held"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store", dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := d.Start(ctx, spec)
	if err == nil {
		for range run.Events() {
		}
		waitExit(t, run, 30*time.Second)
		t.Fatalf("Start over a source swapped for a link to store/ after its check ran the container; want it stopped before its input")
	}
	if !errors.Is(err, ErrMountChanged) || !strings.Contains(err.Error(), ContainerGroupDir) {
		t.Errorf("Start over a swapped source: %v; want ErrMountChanged naming %s", err, ContainerGroupDir)
	}
	if _, err := os.Lstat(filepath.Join(l.StoreDir(), "pwned.txt")); err == nil {
		t.Error("the container wrote into the store through the swapped mount")
	}
	if !strings.Contains(logs.String(), "is not the directory that was checked") || !strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("logs %s; want an error line saying the mount is not the directory that was checked", logs)
	}
	list, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Name == spec.Name {
			t.Errorf("the container %s is still there (%s); want it removed", c.Name, c.State)
		}
	}
}

// A spec that does not come from SpecBuilder gets its sources' identities
// at Start; a source that is a link is refused before anything is created.
func TestDockerStartRefusesLinkedSourceWithoutID(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		real := t.TempDir()
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		spec, _ := e.echoSpec(t, image, "hi")
		spec.Mounts = []Mount{{Source: link, Target: ContainerGroupDir}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if run, err := d.Start(ctx, spec); err == nil {
			d.Stop(ctx, run.ID(), 0)
			t.Fatal("Start with a linked mount source ran; want it refused")
		} else if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("Start with a linked mount source: %v; want ErrBadSpec saying it is a symlink", err)
		}
	})
}

// A source checked and then moved away before the engine reads it: Docker
// refuses such a create, while Podman's Docker API (4.3) would make the
// missing source an empty directory of its own and mount that. Start
// refuses on both engines, says which source is gone (ErrMountChanged),
// leaves no container, and nothing is made in the source's place, so the
// owner's directory can be put back where it was. The links Podman is
// given are gone once the start has failed or succeeded.
func TestDockerStartRefusesVanishedSource(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		links := filepath.Join(t.TempDir(), "links")
		// The daemon's own, which a rootless engine's user (here not the
		// test's) may pass through.
		if err := os.Mkdir(links, 0o711); err != nil {
			t.Fatal(err)
		}
		e.share(t, links)
		opts := e.opts
		opts.LinkDir = links
		d, err := NewDockerWith(zerolog.Nop(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() }) // after start's own clean-up
		image := ensureEchoImage(t, d)
		project := filepath.Join(t.TempDir(), "project")
		src := filepath.Join(project, "app")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		// Anyone may write the project, as an agent that mounts it
		// read-write (and the engine's user) may.
		if err := os.Chmod(project, 0o777); err != nil {
			t.Fatal(err)
		}
		e.share(t, filepath.Dir(project))
		spec, _ := e.echoSpec(t, image, "hi")
		spec.Mounts = []Mount{{Source: src, Target: ContainerExtraDir + "/app", ReadOnly: true}}
		spec.Mounts, _ = mountIDs(spec.Mounts) // as CheckMounts records them
		if err := os.Rename(src, src+".held"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := d.Start(ctx, spec)
		if err == nil {
			for range run.Events() {
			}
			waitExit(t, run, 30*time.Second)
			t.Errorf("Start over a source moved away after its check ran the container; want it refused")
		} else if !errors.Is(err, ErrMountChanged) || !strings.Contains(err.Error(), src) {
			t.Errorf("Start over a source moved away after its check: %v; want ErrMountChanged naming %s", err, src)
		}
		t.Logf("refused: %v", err)
		if fi, err := os.Lstat(src); err == nil {
			t.Errorf("after the refused start %s is there again (%s); want nothing made in the moved source's place", src, fi.Mode())
		}
		if err := os.Rename(src+".held", src); err != nil {
			t.Fatalf("the owner's directory cannot be put back: %v", err)
		}
		// Put back, it is mounted again.
		spec.Name = uniqueName(t)
		run = start(t, d, spec)
		for range run.Events() {
		}
		if exit := waitExit(t, run, 30*time.Second); exit.Code != 0 {
			t.Errorf("the start with the source put back: exit %+v; want 0", exit)
		}
		if left, _ := os.ReadDir(links); len(left) > 0 {
			t.Errorf("%s holds %d entries after the starts; want the links removed", links, len(left))
		}
		list, err := d.ListManaged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if c.Name == spec.Name {
				t.Errorf("the container %s is still there (%s); want it removed", c.Name, c.State)
			}
		}
	})
}

// A refused create or start is told as a moved source only when one is:
// gone or another file now, or its link named in the engine's "no such
// file or directory" (away when the engine looked, back since). Any other
// refusal, one naming the link included, is the engine's own.
func TestSourceGoneSaysWhichSource(t *testing.T) {
	d := &Docker{log: zerolog.Nop()}
	dir := t.TempDir()
	src := filepath.Join(dir, "app")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts, err := mountIDs([]Mount{{Source: src, Target: ContainerExtraDir + "/app"}})
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "links", "x.1", "0")
	linked := []Mount{{Source: link, Target: ContainerExtraDir + "/app"}}
	engine := func(msg string) error { return errors.New(msg) }
	for _, c := range []struct {
		msg, want string // want "": the engine's error as it is
	}{
		{"container create: statfs " + link + ": no such file or directory", "was away when the engine looked"},
		{"making volume mountpoint for volume " + link + ": mkdir " + filepath.Dir(link) + ": permission denied", ""},
		{"the engine is out of disk", ""},
	} {
		err := d.sourceGone("g", engine(c.msg), mounts, linked)
		switch {
		case c.want == "" && errors.Is(err, ErrMountChanged):
			t.Errorf("the engine's %q explained as %v; want it as it is", c.msg, err)
		case c.want != "" && (!errors.Is(err, ErrMountChanged) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), src)):
			t.Errorf("the engine's %q explained as %v; want ErrMountChanged naming %s and saying it %s", c.msg, err, src, c.want)
		}
	}
	if err := os.Rename(src, src+".held"); err != nil {
		t.Fatal(err)
	}
	if err := d.sourceGone("g", engine("the engine is out of disk"), mounts, nil); !errors.Is(err, ErrMountChanged) || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("a refusal with the source moved away: %v; want ErrMountChanged saying it is gone", err)
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.sourceGone("g", engine("the engine is out of disk"), mounts, nil); !errors.Is(err, ErrMountChanged) || !strings.Contains(err.Error(), "is another file now") {
		t.Errorf("a refusal with another directory in the source's place: %v; want ErrMountChanged saying so", err)
	}
}
