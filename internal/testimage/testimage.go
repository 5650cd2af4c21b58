// Package testimage makes agent images for tests without any registry or
// builder: it writes a root filesystem tar in Go (static binaries, a non-root
// user "agent" with uid 1000, a world-writable /tmp, the /workspace mount
// points) and imports it through the Engine API's image import.
//
// The image bridged-agent:test holds ./agent-runner as
// /usr/local/bin/agent-runner (the entrypoint), ./cmd/fakeclaude as
// /usr/local/bin/claude, and the host's static busybox (Debian's
// busybox-static, /bin/busybox) as /bin/busybox with /bin/sh and the usual
// applets linked to it, so the fake's Bash tool runs real shell commands. It
// carries a label with a hash of its content (busybox included), so Ensure
// skips the import when nothing changed. `make test-image` runs
// `go run ./cmd/testimage`.
//
// This is development tooling: BuildAgentBinaries shells out to the go
// toolchain.
package testimage

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// DefaultTag is the test agent image. BRIDGED_TEST_IMAGE names another, so
// that two checkouts testing at once on one engine do not retag each other's
// image under a running test.
var DefaultTag = cmp.Or(os.Getenv("BRIDGED_TEST_IMAGE"), "bridged-agent:test")

const (
	// HashLabel holds the content hash of an image made by this package.
	HashLabel = "bridged.testimage.hash"
	// Entrypoint is the runner's path in the image.
	Entrypoint = "/usr/local/bin/agent-runner"
	// UID and GID of the image's user "agent".
	UID = 1000
	GID = 1000
	// Busybox is busybox's path in the image; when an image holds it, its
	// applets are linked in /bin.
	Busybox = "/bin/busybox"
	// HostBusybox is where Debian's busybox-static package installs it.
	HostBusybox = "/bin/busybox"
	// layoutVersion changes whenever the tar layout below changes, so a
	// new layout never reuses an old image.
	layoutVersion = "testimage-layout-2"
)

// applets are the busybox applets linked in /bin when the image holds
// busybox: a shell and what tests playing an agent need.
var applets = []string{
	"[", "ash", "awk", "basename", "cat", "chmod", "cp", "cut", "date", "dd", "df", "dirname",
	"du", "echo", "env", "false", "find", "grep", "head", "hostname", "id", "kill", "ln", "ls",
	"mkdir", "mkfifo", "mktemp", "mv", "printf", "ps", "pwd", "readlink", "realpath", "rm",
	"rmdir", "sed", "seq", "sh", "sleep", "sort", "stat", "tail", "tee", "test", "timeout",
	"touch", "tr", "true", "truncate", "uname", "uniq", "wc", "whoami", "xargs",
}

// ImageAPI is the part of the Engine API client this package uses;
// *client.Client implements it.
type ImageAPI interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageImport(ctx context.Context, src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
}

var _ ImageAPI = (*client.Client)(nil)

// Options configure Ensure.
type Options struct {
	Tag      string // image to make; default DefaultTag
	RepoRoot string // module root holding ./agent-runner and ./cmd/fakeclaude; default: found from the working directory
	Busybox  string // host path of a static busybox; default HostBusybox
	Force    bool   // import even when the image is up to date
	// Env adds KEY=value variables to the image's environment (benchmarks
	// turn on the fake claude's stdin log this way).
	Env []string
}

// Ensure builds the agent binaries and makes sure the image opts.Tag holds
// exactly them, importing it only when its content hash differs (or
// opts.Force). Safe to call from several test binaries at once: the worst
// case is one import too many.
func Ensure(ctx context.Context, cli ImageAPI, opts Options) error {
	_, err := EnsureAgent(ctx, cli, opts)
	return err
}

// EnsureAgent is Ensure that also reports whether it imported.
func EnsureAgent(ctx context.Context, cli ImageAPI, opts Options) (bool, error) {
	if opts.Tag == "" {
		opts.Tag = DefaultTag
	}
	if opts.RepoRoot == "" {
		root, err := FindRepoRoot()
		if err != nil {
			return false, err
		}
		opts.RepoRoot = root
	}
	dir, err := os.MkdirTemp("", "bridged-testimage-")
	if err != nil {
		return false, fmt.Errorf("test image: %w", err)
	}
	defer os.RemoveAll(dir)
	if opts.Busybox == "" {
		opts.Busybox = HostBusybox
	}
	if err := CheckBusybox(opts.Busybox); err != nil {
		return false, err
	}
	bins, err := BuildAgentBinaries(ctx, opts.RepoRoot, dir)
	if err != nil {
		return false, err
	}
	bins[Busybox] = opts.Busybox
	if opts.Force {
		return true, Build(ctx, cli, opts.Tag, bins, opts.Env...)
	}
	return EnsureImage(ctx, cli, opts.Tag, bins, opts.Env...)
}

// BuildAgentBinaries builds ./agent-runner and ./cmd/fakeclaude of the module
// at repoRoot as static binaries into outDir and returns them keyed by their
// path in the image.
func BuildAgentBinaries(ctx context.Context, repoRoot, outDir string) (map[string]string, error) {
	targets := map[string]string{
		Entrypoint:              "./agent-runner",
		"/usr/local/bin/claude": "./cmd/fakeclaude",
	}
	bins := make(map[string]string, len(targets))
	for inImage, pkg := range targets {
		out := filepath.Join(outDir, path.Base(inImage))
		if err := GoBuild(ctx, repoRoot, pkg, out); err != nil {
			return nil, err
		}
		bins[inImage] = out
	}
	return bins, nil
}

// GoBuild builds the main package pkg (relative to dir, e.g. "./agent-runner")
// as a static binary at out.
func GoBuild(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// CheckBusybox makes sure path is a statically linked busybox, which runs in
// an image without a C library.
func CheckBusybox(path string) error {
	const fix = "install it with `apt-get install busybox-static`"
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("test image: no busybox at %s (the image's shell); %s", path, fix)
		}
		return fmt.Errorf("test image: busybox at %s is not a usable executable (%v); %s", path, err, fix)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("test image: busybox at %s is dynamically linked and cannot run in the image; %s", path, fix)
		}
	}
	return nil
}

// FindRepoRoot walks up from the working directory to the directory holding
// go.mod.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// EnsureImage imports an image holding binaries under tag unless the image
// already there carries the same content hash. It reports whether it
// imported.
func EnsureImage(ctx context.Context, cli ImageAPI, tag string, binaries map[string]string, env ...string) (bool, error) {
	hash, err := imageHash(binaries, env)
	if err != nil {
		return false, err
	}
	img, err := cli.ImageInspect(ctx, tag)
	switch {
	case err == nil:
		if img.Config != nil && img.Config.Labels[HashLabel] == hash {
			return false, nil
		}
	case cerrdefs.IsNotFound(err):
	default:
		return false, fmt.Errorf("inspect image %s: %w", tag, err)
	}
	return true, build(ctx, cli, tag, binaries, env, hash)
}

// imageHash covers the binaries and the extra environment.
func imageHash(binaries map[string]string, env []string) (string, error) {
	hash, err := ContentHash(binaries)
	if err != nil || len(env) == 0 {
		return hash, err
	}
	sum := sha256.Sum256([]byte(hash + "\x00" + strings.Join(env, "\x00")))
	return hex.EncodeToString(sum[:]), nil
}

// Build imports an image named tag from a root filesystem holding binaries
// (path in the image → host path), whatever is there already.
func Build(ctx context.Context, cli ImageAPI, tag string, binaries map[string]string, env ...string) error {
	hash, err := imageHash(binaries, env)
	if err != nil {
		return err
	}
	return build(ctx, cli, tag, binaries, env, hash)
}

func build(ctx context.Context, cli ImageAPI, tag string, binaries map[string]string, env []string, hash string) error {
	changes := []string{
		fmt.Sprintf(`ENTRYPOINT [%q]`, Entrypoint),
		fmt.Sprintf("USER %d:%d", UID, GID),
		"WORKDIR /workspace/group",
		"ENV HOME=/home/agent",
		"ENV PATH=/usr/local/bin:/bin",
		fmt.Sprintf("LABEL %s=%s", HashLabel, hash),
	}
	for _, kv := range env {
		changes = append(changes, "ENV "+kv)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteRootfs(pw, binaries)) }()
	defer pr.Close()
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, tag, client.ImageImportOptions{
		Message: "bridged test agent image",
		Changes: changes,
	})
	if err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	return nil
}

// readProgress reads the engine's JSON progress stream and returns the error
// it reports, if any.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read progress: %w", err)
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// ContentHash hashes the layout version, every binary's image path and
// content, and the applet links when busybox is one of them, so equal inputs
// give equal images.
func ContentHash(binaries map[string]string) (string, error) {
	h := sha256.New()
	io.WriteString(h, layoutVersion+"\n")
	if _, ok := binaries[Busybox]; ok {
		fmt.Fprintf(h, "applets %s\n", strings.Join(applets, " "))
	}
	for _, p := range sortedKeys(binaries) {
		f, err := os.Open(binaries[p])
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", p, err)
		}
		fmt.Fprintf(h, "%s\n", p)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", p, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// WriteRootfs writes the image's root filesystem as a tar to w: /etc/passwd
// and /etc/group with root and agent (1000:1000, home /home/agent),
// /home/agent and /home/agent/.claude owned by agent, /tmp with mode 1777,
// the /workspace mount points, each binary (mode 0755, owned by root) with its
// parent directories, and, when busybox is one of them, a symbolic link
// /bin/<applet> → busybox for each of applets.
func WriteRootfs(w io.Writer, binaries map[string]string) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	dir := func(name string, mode int64, uid, gid int) error {
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	type d struct {
		name     string
		mode     int64
		uid, gid int
	}
	for _, x := range []d{
		{"etc", 0o755, 0, 0},
		{"home", 0o755, 0, 0},
		{"home/agent", 0o755, UID, GID},
		{"home/agent/.claude", 0o755, UID, GID},
		{"tmp", 0o1777, 0, 0},
		{"workspace", 0o755, 0, 0},
		{"workspace/group", 0o755, UID, GID},
		{"workspace/global", 0o755, UID, GID},
		{"workspace/ipc", 0o755, UID, GID},
		{"workspace/extra", 0o755, 0, 0},
		{"workspace/groups", 0o755, UID, GID},
		{"usr", 0o755, 0, 0},
		{"usr/local", 0o755, 0, 0},
		{"usr/local/bin", 0o755, 0, 0},
	} {
		if err := dir(x.name, x.mode, x.uid, x.gid); err != nil {
			return fmt.Errorf("write rootfs: %w", err)
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nagent:x:%d:%d:agent:/home/agent:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nagent:x:%d:\n", GID)
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return fmt.Errorf("write rootfs: %w", err)
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return fmt.Errorf("write rootfs: %w", err)
	}
	for _, p := range sortedKeys(binaries) {
		name := strings.TrimPrefix(path.Clean("/"+p), "/")
		if name == "" {
			return fmt.Errorf("write rootfs: bad image path %q", p)
		}
		// Parent directories not made above.
		var parents []string
		for par := path.Dir(name); par != "." && !dirs[par]; par = path.Dir(par) {
			parents = append([]string{par}, parents...)
		}
		for _, par := range parents {
			if err := dir(par, 0o755, 0, 0); err != nil {
				return fmt.Errorf("write rootfs: %w", err)
			}
		}
		if err := copyFile(tw, name, binaries[p], mtime); err != nil {
			return fmt.Errorf("write rootfs: %w", err)
		}
	}
	if _, ok := binaries[Busybox]; ok {
		for _, a := range applets {
			link := path.Join(path.Dir(Busybox), a)
			if _, taken := binaries[link]; taken || link == Busybox {
				continue
			}
			hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(link, "/"),
				Linkname: path.Base(Busybox), Mode: 0o777, ModTime: mtime}
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("write rootfs: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write rootfs: %w", err)
	}
	return nil
}

func copyFile(tw *tar.Writer, name, src string, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: fi.Size(), ModTime: mtime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
