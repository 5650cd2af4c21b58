package home

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// POSIX ACLs as Linux stores them in the system.posix_acl_access and
// system.posix_acl_default extended attributes: a version, then one
// (tag, permissions, id) entry per line of the ACL, sorted by tag and id.
const (
	aclVersion  = 2
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff

	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// encodeACL is the extended attribute's value of entries.
func encodeACL(entries []aclEntry) []byte {
	slices.SortFunc(entries, func(a, b aclEntry) int {
		if a.tag != b.tag {
			return int(a.tag) - int(b.tag)
		}
		return int(int64(a.id) - int64(b.id))
	})
	b := make([]byte, 4, 4+8*len(entries))
	binary.LittleEndian.PutUint32(b, aclVersion)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// grantACL gives uid the owner's permissions on the entry open at fd (st
// is its stat) by its access ACL and, for a directory, grants uid and self
// (the daemon) everything on what is made in it later by its default ACL:
// a file the agent makes there is the daemon's to read and remove too. A
// symlink carries no ACL and is left alone.
func grantACL(fd int, st *unix.Stat_t, uid, _ int, self int) error {
	ft := st.Mode & unix.S_IFMT
	if ft == unix.S_IFLNK {
		return nil
	}
	owner := uint16(st.Mode>>6) & 7
	access := []aclEntry{
		{aclUserObj, owner, aclNoID},
		{aclUser, owner, uint32(uid)},
		{aclGroupObj, uint16(st.Mode>>3) & 7, aclNoID},
		{aclMask, 7, aclNoID},
		{aclOther, uint16(st.Mode) & 7, aclNoID},
	}
	path := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Setxattr(path, xattrACLAccess, encodeACL(access), 0); err != nil {
		return fmt.Errorf("grant uid %d by ACL (does the home's file system support POSIX ACLs?): %w", uid, err)
	}
	if ft != unix.S_IFDIR {
		return nil
	}
	def := []aclEntry{
		{aclUserObj, 7, aclNoID},
		{aclUser, 7, uint32(uid)},
		{aclGroupObj, 5, aclNoID},
		{aclMask, 7, aclNoID},
		{aclOther, 5, aclNoID},
	}
	if self != uid {
		def = append(def, aclEntry{aclUser, 7, uint32(self)})
	}
	if err := unix.Setxattr(path, xattrACLDefault, encodeACL(def), 0); err != nil {
		return fmt.Errorf("grant uid %d by default ACL: %w", uid, err)
	}
	return nil
}

// hasDefaultACL reports whether the directory open at fd has a default ACL.
func hasDefaultACL(fd int) bool {
	n, err := unix.Fgetxattr(fd, xattrACLDefault, nil)
	return err == nil && n > 0
}

// ACLSupported says whether the file system of dir takes the ACLs Grant
// sets: nil when it does, else why not. It grants on a scratch directory
// it makes in dir and removes.
func ACLSupported(dir string) error {
	tmp, err := os.MkdirTemp(dir, ".acl-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	fd, err := unix.Open(tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	self := os.Geteuid()
	return grantACL(fd, &st, self+1, self+1, self)
}
