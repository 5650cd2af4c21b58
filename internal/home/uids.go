package home

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Each group's agent runs as a uid of its own, so that the kernel, not a
// check, keeps one agent out of another's files. The uids are given out in
// order from the base up (base+1, base+2, …), one per group folder, the
// first time a folder's container is prepared, and written to
// data/group-uids.json before they are used: a folder keeps its uid for the
// life of the home, and a uid is never given again, even once its group is
// removed (files it left anywhere stay no other group's). The gid is the
// same number.

// GroupUIDsName is the file, in data/, that holds the group uids.
const GroupUIDsName = "group-uids.json"

// MaxGroupUIDs is how many uids a home gives out above its base: with the
// default base (61000) the highest is 65095, inside the 65536 subordinate
// ids rootless Podman maps by default.
const MaxGroupUIDs = 4095

// ErrNoGroupUID is returned when the home has given out every uid.
var ErrNoGroupUID = errors.New("no group uid left")

// GroupUIDs gives each group folder its own uid. Safe for concurrent use.
type GroupUIDs struct {
	path string
	base int
	// daemon is the daemon's own uid, never given to a group: on rootful
	// Docker a group's uid is the host's, and an agent running as the
	// daemon would own the home.
	daemon int
	mu     sync.Mutex
	uids   map[string]int
}

type groupUIDsFile struct {
	Base int            `json:"base"`
	UIDs map[string]int `json:"uids"`
}

// OpenGroupUIDs reads the home's group uids (none yet when the file is
// missing). base is the uid below the first one given out; a home whose
// file was written with another base keeps the uids it gave and gives new
// ones above both.
func OpenGroupUIDs(l Layout, base int) (*GroupUIDs, error) {
	if base <= 0 {
		return nil, fmt.Errorf("group uids: base %d: want a positive uid", base)
	}
	u := &GroupUIDs{path: filepath.Join(l.DataDir(), GroupUIDsName), base: base, daemon: os.Geteuid(), uids: map[string]int{}}
	data, err := os.ReadFile(u.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return u, nil
	case err != nil:
		return nil, fmt.Errorf("group uids: %w", err)
	}
	var f groupUIDsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("group uids: %s: %w", u.path, err)
	}
	for folder, uid := range f.UIDs {
		if CheckFolder(folder) != nil || uid <= 0 || uid == u.daemon {
			return nil, fmt.Errorf("group uids: %s: bad entry %q: %d", u.path, folder, uid)
		}
		u.uids[folder] = uid
	}
	return u, nil
}

// UID is folder's uid, given out now (and written down before it is
// returned) if the folder has none yet.
func (u *GroupUIDs) UID(folder string) (int, error) {
	if err := CheckFolder(folder); err != nil {
		return 0, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if uid, ok := u.uids[folder]; ok {
		return uid, nil
	}
	next := u.base + 1
	for _, uid := range u.uids {
		next = max(next, uid+1)
	}
	if next == u.daemon {
		next++
	}
	if next > u.base+MaxGroupUIDs {
		return 0, fmt.Errorf("%w: %d given out", ErrNoGroupUID, len(u.uids))
	}
	u.uids[folder] = next
	if err := u.save(); err != nil {
		delete(u.uids, folder)
		return 0, err
	}
	return next, nil
}

// save writes the file complete or not at all.
func (u *GroupUIDs) save() error {
	data, err := json.MarshalIndent(groupUIDsFile{Base: u.base, UIDs: u.uids}, "", "  ")
	if err != nil {
		return fmt.Errorf("group uids: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(u.path), "."+GroupUIDsName+".*.tmp")
	if err != nil {
		return fmt.Errorf("group uids: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, u.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("group uids: %w", err)
	}
	return nil
}
