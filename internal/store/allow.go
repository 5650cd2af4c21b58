package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sender id forms an allow list holds.
const (
	phoneServer = "@s.whatsapp.net"
	lidServer   = "@lid"
	localPrefix = "local:"
	tgPrefix    = "tg:"
)

// AllowOwner, alone in a group's allow list, admits the owner only: nobody
// else's message wakes the agent.
const AllowOwner = "me"

// NormalizeSender turns an allow-list entry as the owner writes it into
// the form senders are stored in: a phone number ("+49 170 1234567") into
// "491701234567@s.whatsapp.net", a WhatsApp id without its device part
// ("491701234567:3@s.whatsapp.net", "1234:5@lid"), a local sender
// ("local:bob"), a Telegram user ("tg:123456"), AllowAdmins and AllowOwner
// as they are.
func NormalizeSender(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.EqualFold(s, AllowAdmins):
		return AllowAdmins, nil
	case strings.EqualFold(s, AllowOwner):
		return AllowOwner, nil
	case strings.HasPrefix(strings.ToLower(s), tgPrefix):
		id := s[len(tgPrefix):]
		if !allDigits(id) {
			return "", fmt.Errorf("sender %q: want tg:USERID, a Telegram user id (digits)", s)
		}
		return tgPrefix + id, nil
	case strings.HasPrefix(s, localPrefix):
		name := strings.TrimPrefix(s, localPrefix)
		if name == "" || strings.ContainsFunc(name, isSpace) {
			return "", fmt.Errorf("sender %q: want local:NAME, a name without spaces", s)
		}
		return s, nil
	case strings.Contains(s, "@"):
		user, server, _ := strings.Cut(strings.ToLower(s), "@")
		user, _, _ = strings.Cut(user, ":") // the device
		if server == "s.whatsapp.net" {
			user, _, _ = strings.Cut(user, ".") // the agent
		}
		if (server != "s.whatsapp.net" && server != "lid") || !allDigits(user) {
			return "", fmt.Errorf("sender %q: want a phone number, NUMBER@s.whatsapp.net, NUMBER@lid or local:NAME", s)
		}
		return user + "@" + server, nil
	}
	digits := strings.Map(func(r rune) rune {
		switch r {
		case '+', ' ', '-', '(', ')', '.':
			return -1
		}
		return r
	}, s)
	if len(digits) < 5 || len(digits) > 20 || !allDigits(digits) {
		return "", fmt.Errorf("sender %q: want a phone number with its country code, NUMBER@lid, local:NAME, tg:USERID or admins", s)
	}
	return digits + phoneServer, nil
}

// NormalizeAllow normalises every entry of an allow list (NormalizeSender)
// and drops repeats, keeping the order. AllowOwner goes alone: the owner
// is admitted whatever the list says.
func NormalizeAllow(allow []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range allow {
		n, err := NormalizeSender(a)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if seen[AllowOwner] && len(out) > 1 {
		return nil, fmt.Errorf("sender %q (the owner only) goes alone: the owner may always wake the agent, so list the others without it", AllowOwner)
	}
	return out, nil
}

// OwnerOnly reports whether g's allow list admits nobody but the owner.
func (g Group) OwnerOnly() bool {
	return len(g.Allow) == 1 && g.Allow[0] == AllowOwner
}

// ErrNotAllowed is what a group's allow list says of a sender it does not
// admit.
var ErrNotAllowed = errors.New("sender not allowed")

// Admits reports whether g's allow list admits a sender known by ids (its
// stored id first, then any other form the channel knows, such as its LID
// for a phone number) who is, or is not, an admin of the chat. An empty
// list admits everyone; AllowOwner alone admits nobody. The owner's own messages are admitted before this
// is asked.
func (g Group) Admits(ids []string, admin bool) bool {
	if len(g.Allow) == 0 {
		return true
	}
	if admin && slices.Contains(g.Allow, AllowAdmins) {
		return true
	}
	for _, id := range ids {
		if n, err := NormalizeSender(id); err == nil && n != AllowAdmins && n != AllowOwner && slices.Contains(g.Allow, n) {
			return true
		}
	}
	return false
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
