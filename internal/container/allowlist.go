package container

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrMountRefused is wrapped by every error Check returns for a mount the
// allowlist does not permit.
var ErrMountRefused = errors.New("mount refused")

// DefaultBlockedPatterns returns the patterns refused in every mount path,
// whatever the allowlist file says (DESIGN §11).
func DefaultBlockedPatterns() []string {
	return []string{
		".ssh", ".gnupg", ".aws", ".azure", ".gcloud", ".kube", ".docker",
		"credentials", ".env", ".netrc", ".npmrc", "id_rsa", "id_ed25519",
		"private_key", ".secret",
	}
}

// AllowedRoot is one directory under which extra mounts may live.
type AllowedRoot struct {
	Path           string `json:"path"`
	AllowReadWrite bool   `json:"allowReadWrite"`
	Description    string `json:"description,omitempty"`
}

type allowlistFile struct {
	AllowedRoots    []AllowedRoot `json:"allowedRoots"`
	BlockedPatterns []string      `json:"blockedPatterns"`
	NonMainReadOnly *bool         `json:"nonMainReadOnly"`
}

type root struct {
	real string // symlinks resolved
	rw   bool
}

// Allowlist decides which extra host directories a group may mount. It is
// immutable once loaded and safe for concurrent use.
type Allowlist struct {
	file            string
	roots           []root
	blocked         []string
	nonMainReadOnly bool
	protected       []string // never mounted, nor anything containing them
	masks           *masker  // nil: blocked entries inside a mount refuse it (see WithMasks)
}

// MountRequest is an extra mount as a group's configuration asks for it.
type MountRequest struct {
	HostPath      string `json:"hostPath"`                // may start with ~
	ContainerPath string `json:"containerPath,omitempty"` // name under /workspace/extra; default: the host directory's name
	ReadWrite     bool   `json:"readWrite,omitempty"`
}

// LoadAllowlist reads the allowlist file at path. A missing file yields an
// allowlist that allows nothing (no extra mounts), not an error; an unreadable
// or invalid file is an error naming the file. Mounts of the file itself, of
// the protect paths (the bridged home, the env file) and of anything inside
// or containing them are always refused. Roots that do not exist are
// ignored.
func LoadAllowlist(file string, protect ...string) (*Allowlist, error) {
	a, err := newAllowlist(file, protect)
	if err != nil {
		return nil, err
	}
	file = a.file
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mount allowlist %s: %w", file, err)
	}
	return a.parse(data)
}

// ParseAllowlist is LoadAllowlist of data, the content file is to hold (a
// file not yet written: an import's plan checks mounts against it). The
// file is read nowhere; it names the allowlist in errors and is protected.
func ParseAllowlist(file string, data []byte, protect ...string) (*Allowlist, error) {
	a, err := newAllowlist(file, protect)
	if err != nil {
		return nil, err
	}
	return a.parse(data)
}

// newAllowlist is the allowlist of file (made absolute) that allows
// nothing yet, with file and protect protected.
func newAllowlist(file string, protect []string) (*Allowlist, error) {
	file, err := absPath(file)
	if err != nil {
		return nil, fmt.Errorf("mount allowlist %s: %w", file, err)
	}
	a := &Allowlist{file: file, nonMainReadOnly: true, blocked: DefaultBlockedPatterns()}
	for _, p := range append([]string{file}, protect...) {
		if p == "" {
			continue
		}
		p, err := absPath(p)
		if err != nil {
			return nil, fmt.Errorf("mount allowlist %s: %w", file, err)
		}
		a.protected = append(a.protected, resolveLenient(p))
	}
	return a, nil
}

// parse reads the allowlist file's content data into a, whose file and
// protected paths are set.
func (a *Allowlist) parse(data []byte) (*Allowlist, error) {
	file := a.file
	var f allowlistFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("mount allowlist %s: invalid JSON: %w", file, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("mount allowlist %s: invalid JSON: trailing data", file)
	}
	if f.NonMainReadOnly != nil {
		a.nonMainReadOnly = *f.NonMainReadOnly
	}
	for i, r := range f.AllowedRoots {
		if strings.TrimSpace(r.Path) == "" {
			return nil, fmt.Errorf("mount allowlist %s: allowedRoots[%d] has no path", file, i)
		}
		p, err := expandHome(r.Path)
		if err != nil {
			return nil, fmt.Errorf("mount allowlist %s: allowedRoots[%d]: %w", file, i, err)
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("mount allowlist %s: allowedRoots[%d] %q is not an absolute path", file, i, r.Path)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // a root that does not exist allows nothing
		}
		a.roots = append(a.roots, root{real: real, rw: r.AllowReadWrite})
	}
	for i, pat := range f.BlockedPatterns {
		pat = strings.TrimSpace(pat)
		if pat == "" {
			return nil, fmt.Errorf("mount allowlist %s: blockedPatterns[%d] is empty", file, i)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("mount allowlist %s: blockedPatterns[%d] %q: %w", file, i, pat, err)
		}
		a.blocked = append(a.blocked, pat)
	}
	return a, nil
}

// Empty reports whether the allowlist allows no mount at all.
func (a *Allowlist) Empty() bool { return len(a.roots) == 0 }

// At most 64 characters, checked apart from the pattern (a bounded
// repetition compiles to a far larger program).
var containerNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// Check decides one extra mount. The host path has ~ expanded and its
// symlinks resolved before anything is checked; it must exist, lie under an
// allowed root, contain no blocked component and not overlap the allowlist
// file, the bridged home or the other protected paths. The container name
// (default: the directory's name) must be one simple path component; the
// mount lands at /workspace/extra/<name>. It is read-write only when asked
// for, allowed by its root, and the group is main or the allowlist lets
// non-main groups write; otherwise it is read-only. Every refusal wraps
// ErrMountRefused and says why.
func (a *Allowlist) Check(req MountRequest, isMain bool) (Mount, error) {
	m, _, err := a.check(req, isMain)
	return m, err
}

// refusal is a refused mount: it wraps ErrMountRefused and names the path.
func refusal(hostPath, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMountRefused, hostPath, fmt.Sprintf(format, args...))
}

// check is Check, also returning the allowed root the mount lies under.
func (a *Allowlist) check(req MountRequest, isMain bool) (Mount, *root, error) {
	refuse := func(format string, args ...any) (Mount, *root, error) {
		return Mount{}, nil, refusal(req.HostPath, format, args...)
	}
	if strings.TrimSpace(req.HostPath) == "" {
		return refuse("no host path")
	}
	if len(a.roots) == 0 {
		return refuse("the mount allowlist %s allows no directories", a.file)
	}
	expanded, err := expandHome(req.HostPath)
	if err != nil {
		return refuse("%v", err)
	}
	if !filepath.IsAbs(expanded) {
		return refuse("not an absolute path")
	}
	expanded = filepath.Clean(expanded)
	real, err := filepath.EvalSymlinks(expanded)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return refuse("does not exist")
		}
		return refuse("%v", err)
	}
	for _, p := range []string{expanded, real} {
		if pat, comp, ok := a.blockedComponent(p); ok {
			return refuse("path component %q matches blocked pattern %q", comp, pat)
		}
	}
	for _, p := range a.protected {
		if within(real, p) || within(p, real) {
			return refuse("overlaps %s, which is never mounted", p)
		}
	}
	var matched *root
	for i := range a.roots {
		if within(real, a.roots[i].real) {
			matched = &a.roots[i]
			break
		}
	}
	if matched == nil {
		return refuse("not under an allowed root of %s", a.file)
	}
	name := req.ContainerPath
	if name == "" {
		name = filepath.Base(real)
	}
	if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || len(name) > 64 || !containerNameRE.MatchString(name) {
		return refuse("container name %q must be one simple name of at most 64 letters, digits, . _ or -, without .. or /", name)
	}
	rw := req.ReadWrite && matched.rw && (isMain || !a.nonMainReadOnly)
	return Mount{Source: real, Target: ContainerExtraDir + "/" + name, ReadOnly: !rw}, matched, nil
}

// CheckAll checks every request and returns the mounts that passed, in order,
// and the refusals joined into one error (nil if none). A second mount at the
// same container name is refused. Each mount is followed by the masks that
// hide the blocked entries inside it (see WithMasks): a mount that contains
// blocked entries is refused when the allowlist has no masks, or when there
// are too many of them or too many entries to search. The container
// runtime mounts a mask after the mount it lies in (the engine orders bind
// mounts by the depth of their targets).
func (a *Allowlist) CheckAll(reqs []MountRequest, isMain bool) ([]Mount, error) {
	planned, errs := a.plan(reqs, isMain)
	var out []Mount
	for _, p := range planned {
		if len(p.hidden) == 0 {
			out = append(out, p.mount)
			continue
		}
		dir, file, err := a.masks.ensure()
		if err != nil {
			errs = append(errs, refusal(p.req.HostPath, "cannot hide %s inside it: %v", p.hidden[0].rel, err))
			continue
		}
		out = append(out, p.mount)
		for _, h := range p.hidden {
			src := file
			if h.dir {
				src = dir
			}
			out = append(out, Mount{Source: src, Target: p.mount.Target + "/" + h.rel, ReadOnly: true})
		}
	}
	return out, errors.Join(errs...)
}

// Validate checks requests as CheckAll would when a group's extra mounts are
// set, without creating anything, so a person learns at once what a
// container would refuse. It also refuses a read-write request the
// allowlist would make read-only, saying why; CheckAll mounts those
// read-only.
func (a *Allowlist) Validate(reqs []MountRequest, isMain bool) error {
	planned, errs := a.plan(reqs, isMain)
	for _, p := range planned {
		if !p.req.ReadWrite || !p.mount.ReadOnly {
			continue
		}
		why := fmt.Sprintf("its allowed root %s is read-only (allowReadWrite is false in %s)", p.root.real, a.file)
		if p.root.rw {
			why = fmt.Sprintf("%s makes every mount of a non-main group read-only (nonMainReadOnly)", a.file)
		}
		errs = append(errs, refusal(p.req.HostPath, "read-write was asked for, but %s; ask for :ro", why))
	}
	return errors.Join(errs...)
}

// plannedMount is a mount that passed its checks, with the blocked entries
// found inside it.
type plannedMount struct {
	req    MountRequest
	mount  Mount
	root   *root
	hidden []hiddenEntry
}

// plan checks each request, refuses a second mount at the same container
// name, and finds the blocked entries inside each mount.
func (a *Allowlist) plan(reqs []MountRequest, isMain bool) ([]plannedMount, []error) {
	var (
		out  []plannedMount
		errs []error
		seen = make(map[string]bool)
	)
	for _, r := range reqs {
		m, rt, err := a.check(r, isMain)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[m.Target] {
			errs = append(errs, refusal(r.HostPath, "%s is already mounted", m.Target))
			continue
		}
		seen[m.Target] = true
		hidden, err := a.findBlocked(m.Source)
		if err != nil {
			errs = append(errs, refusal(r.HostPath, "%v", err))
			continue
		}
		if len(hidden) > 0 && a.masks == nil {
			errs = append(errs, refusal(r.HostPath, "%s inside it matches a blocked pattern and cannot be hidden here", hidden[0].rel))
			continue
		}
		out = append(out, plannedMount{req: r, mount: m, root: rt, hidden: hidden})
	}
	return out, errs
}

// blockedComponent reports the first component of p matching a blocked
// pattern. A pattern with glob characters (* ? [) must match a whole
// component; any other pattern matches a component containing it, where an
// alphanumeric edge of the pattern must sit at a word boundary: ".env"
// matches ".env", "prod.env" and ".env.local" but not ".environment";
// "credentials" matches "aws_credentials.json" but not "nocredentialsx".
// Matching ignores case.
func (a *Allowlist) blockedComponent(p string) (pattern, component string, ok bool) {
	for _, comp := range strings.Split(filepath.ToSlash(p), "/") {
		if comp == "" {
			continue
		}
		if pat, ok := a.blockedName(comp); ok {
			return pat, comp, true
		}
	}
	return "", "", false
}

// blockedName reports the first blocked pattern name matches.
func (a *Allowlist) blockedName(name string) (pattern string, ok bool) {
	lc := strings.ToLower(name)
	for _, pat := range a.blocked {
		if componentMatches(lc, strings.ToLower(pat)) {
			return pat, true
		}
	}
	return "", false
}

func componentMatches(comp, pat string) bool {
	if strings.ContainsAny(pat, "*?[") {
		ok, _ := path.Match(pat, comp)
		return ok
	}
	for from := 0; ; {
		i := strings.Index(comp[from:], pat)
		if i < 0 {
			return false
		}
		start := from + i
		end := start + len(pat)
		leftOK := !isAlnum(pat[0]) || start == 0 || !isAlnum(comp[start-1])
		rightOK := !isAlnum(pat[len(pat)-1]) || end == len(comp) || !isAlnum(comp[end])
		if leftOK && rightOK {
			return true
		}
		from = start + 1
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// within reports whether p is dir or lies below it (both clean and absolute).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel))
}

// resolveLenient resolves symlinks in p as far as it exists.
func resolveLenient(p string) string {
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	dir, base := filepath.Split(p)
	if dir == "" || dir == p || filepath.Clean(dir) == p {
		return p
	}
	return filepath.Join(resolveLenient(filepath.Clean(dir)), base)
}

// absPath expands a leading ~ and makes p absolute.
func absPath(p string) (string, error) {
	p, err := expandHome(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// expandHome expands a leading ~ or ~/ to the user's home directory.
func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand ~: %w", err)
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
	}
	return p, nil
}
