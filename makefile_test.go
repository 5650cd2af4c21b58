package bridged_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDocker puts a docker on PATH that answers `image inspect` with label
// (exit 1 when label is "missing"), fails `build` with Docker's DNS error
// when buildFails, and logs every call to the returned file.
func fakeDocker(t *testing.T, label string, buildFails bool) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	inspect := "echo '" + label + "'"
	if label == "missing" {
		inspect = "echo 'Error response from daemon: No such image' >&2; exit 1"
	}
	build := "exit 0"
	if buildFails {
		build = "echo 'ERROR: failed to resolve source metadata for docker.io/library/golang:1.26-bookworm: dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1"
	}
	script := "#!/bin/sh\necho \"$*\" >>" + calls + "\ncase \"$1 $2\" in\n'image inspect') " + inspect + ";;\nbuild*) " + build + ";;\nesac\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH"), calls
}

func makeTarget(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	// Not the make that runs the suite (make test): its flags and jobserver
	// are not this make's.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+path)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// `make run`'s image step: a missing image that cannot be built (no
// registry) ends with the test-image fallback; an image `make image` built
// from other sources is rebuilt; an image built from these sources, or
// another image named with IMAGE=, is used as it is.
func TestMakeRunAgentImage(t *testing.T) {
	path, _ := fakeDocker(t, "missing", true)
	out, err := makeTarget(t, path, "agent-image")
	if err == nil || !strings.Contains(out, "make test-image && make run IMAGE=bridged-agent:test") {
		t.Errorf("make agent-image without a registry: %v\n%s\nwant a failure naming the test-image fallback", err, out)
	}

	want, err := makeTarget(t, os.Getenv("PATH"), "-s", "--eval", "print-inputs: ; @echo $(IMAGE_INPUTS)", "print-inputs")
	want = strings.TrimSpace(want)
	if err != nil || len(want) != 16 {
		t.Fatalf("IMAGE_INPUTS: %q, %v", want, err)
	}
	for _, tc := range []struct {
		label, image string
		rebuild      bool
	}{
		{"0123456789abcdef", "bridged-agent:latest", true}, // built before a git pull
		{"", "bridged-agent:latest", true},                 // built before images were labelled
		{want, "bridged-agent:latest", false},
		{"", "bridged-agent:test", false}, // the test image, named by IMAGE=
	} {
		path, calls := fakeDocker(t, tc.label, false)
		out, err := makeTarget(t, path, "agent-image", "IMAGE="+tc.image)
		if err != nil {
			t.Errorf("label %q, IMAGE=%s: %v\n%s", tc.label, tc.image, err, out)
			continue
		}
		log, _ := os.ReadFile(calls)
		built := strings.Contains(string(log), "build --label bridged.inputs="+want)
		if built != tc.rebuild {
			t.Errorf("label %q, IMAGE=%s: docker calls\n%s\nrebuilt %v; want %v", tc.label, tc.image, log, built, tc.rebuild)
		}
	}
}

// fakeTools puts a curl on PATH that fails as with no network (or answers,
// when reachable) and a go that logs its calls and builds nothing, in front
// of path.
func fakeTools(t *testing.T, path string, reachable bool) (newPath, goPath, goCalls string) {
	t.Helper()
	dir := t.TempDir()
	goCalls = filepath.Join(dir, "go-calls")
	curl := "#!/bin/sh\nexit 0\n"
	if !reachable {
		curl = "#!/bin/sh\nexit 6\n" // curl: could not resolve host
	}
	goPath = filepath.Join(dir, "go")
	for name, script := range map[string]string{"curl": curl, "go": "#!/bin/sh\necho \"$*\" >>" + goCalls + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir + string(os.PathListSeparator) + path, goPath, goCalls
}

// `make run` finds out that the image it must build cannot be (no Docker
// Hub, no npm) before it compiles anything, and names the fallback; with
// the image there, or the registries answering, it goes on.
func TestMakeRunChecksRegistryFirst(t *testing.T) {
	docker, _ := fakeDocker(t, "missing", true)
	path, goPath, goCalls := fakeTools(t, docker, false)
	out, err := makeTarget(t, path, "run", "GO="+goPath)
	if err == nil || !strings.Contains(out, "make test-image && make run IMAGE=bridged-agent:test") || !strings.Contains(out, "registry-1.docker.io") {
		t.Errorf("make run without a registry: %v\n%s\nwant a failure naming the unreachable registry and the fallback", err, out)
	}
	if log, _ := os.ReadFile(goCalls); strings.Contains(string(log), "build") {
		t.Errorf("make run without a registry compiled first:\n%s", log)
	}

	for _, tc := range []struct {
		label, image string
		reachable    bool
	}{
		{"missing", "bridged-agent:latest", true}, // the registries answer
		{"", "bridged-agent:test", false},         // the test image, there: nothing to build
		{"missing", "bridged-agent:test", false},  // the test image, missing: built without a registry
	} {
		docker, _ := fakeDocker(t, tc.label, false)
		path, goPath, _ := fakeTools(t, docker, tc.reachable)
		if out, err := makeTarget(t, path, "image-reachable", "IMAGE="+tc.image, "GO="+goPath); err != nil || out != "" {
			t.Errorf("make image-reachable, image %s (label %q), registries answering %v: %v\n%s\nwant a silent pass", tc.image, tc.label, tc.reachable, err, out)
		}
	}
}

// `make test-image` installs what the test image needs and no browser;
// `make deps` installs both.
func TestMakeTestImageDeps(t *testing.T) {
	out, err := makeTarget(t, os.Getenv("PATH"), "-n", "test-image", "GO=true")
	if err != nil || !strings.Contains(out, "busybox-static") || strings.Contains(out, "chromium") {
		t.Errorf("make -n test-image: %v\n%s\nwant busybox-static installed, not chromium", err, out)
	}
	out, err = makeTarget(t, os.Getenv("PATH"), "-n", "deps")
	if err != nil || !strings.Contains(out, "busybox-static") || !strings.Contains(out, "chromium") {
		t.Errorf("make -n deps: %v\n%s\nwant busybox-static and chromium", err, out)
	}
}

// `make run IMAGE=bridged-agent:test` with the test image missing builds
// the test image (from static binaries), not the Dockerfile under its name.
func TestMakeRunBuildsMissingTestImage(t *testing.T) {
	docker, calls := fakeDocker(t, "missing", true)
	path, goPath, _ := fakeTools(t, docker, false)
	out, err := makeTarget(t, path, "-n", "agent-image", "IMAGE=bridged-agent:test", "GO="+goPath)
	if err != nil || !strings.Contains(out, "run ./cmd/testimage -tag bridged-agent:test") || !strings.Contains(out, "busybox-static") {
		t.Errorf("make -n agent-image IMAGE=bridged-agent:test, image missing: %v\n%s\nwant the test image built", err, out)
	}
	if log, _ := os.ReadFile(calls); strings.Contains(string(log), "build") {
		t.Errorf("docker calls:\n%s\nwant no docker build", log)
	}
}
