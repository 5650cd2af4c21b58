package whatsapp

import (
	"context"
	"fmt"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
)

// waClient is the part of *whatsmeow.Client the channel uses. Tests replace
// it with a fake; realClient adapts the real one.
type waClient interface {
	// Paired reports whether the device store holds a paired device.
	Paired() bool
	// OwnIDs returns the account's phone-number JID and LID (empty when
	// unknown), without device parts.
	OwnIDs() (pn, lid types.JID)
	// ConnectContext opens the websocket; authentication results arrive as
	// events.
	ConnectContext(ctx context.Context) error
	// Disconnect closes the websocket without emitting events.
	Disconnect()
	SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error)
	SendPresence(ctx context.Context, state types.Presence) error
	SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error
	GetJoinedGroups(ctx context.Context) ([]*types.GroupInfo, error)
	DownloadToFile(ctx context.Context, msg whatsmeow.DownloadableMessage, file whatsmeow.File) error
	// Upload encrypts and uploads a file for a media message; the
	// response's fields go into the message.
	Upload(ctx context.Context, plaintext []byte, appInfo whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	// PNForLID looks up whatsmeow's LID map; an empty JID and a nil error
	// mean no mapping is known.
	PNForLID(ctx context.Context, lid types.JID) (types.JID, error)
	// ContactName is the best known display name of a user, or "".
	ContactName(ctx context.Context, user types.JID) string
}

// realClient adapts *whatsmeow.Client to waClient.
type realClient struct {
	*whatsmeow.Client
}

var _ waClient = realClient{}

func (r realClient) Paired() bool {
	return r.Store != nil && r.Store.ID != nil && !r.Store.Deleted
}

func (r realClient) OwnIDs() (pn, lid types.JID) {
	if r.Store == nil {
		return types.EmptyJID, types.EmptyJID
	}
	pn = r.Store.GetJID()
	if !pn.IsEmpty() {
		pn = pn.ToNonAD()
	}
	lid = r.Store.GetLID()
	if !lid.IsEmpty() {
		lid = lid.ToNonAD()
	}
	return pn, lid
}

func (r realClient) PNForLID(ctx context.Context, lid types.JID) (types.JID, error) {
	if r.Store == nil || r.Store.LIDs == nil {
		return types.EmptyJID, nil // not paired: no LID map
	}
	pn, err := r.Store.LIDs.GetPNForLID(ctx, lid)
	if err != nil {
		return types.EmptyJID, fmt.Errorf("look up phone number of %s: %w", lid, err)
	}
	return pn, nil
}

func (r realClient) ContactName(ctx context.Context, user types.JID) string {
	info, err := r.Store.Contacts.GetContact(ctx, user)
	if err != nil || !info.Found {
		return ""
	}
	for _, name := range []string{info.FullName, info.FirstName, info.PushName, info.BusinessName} {
		if name != "" {
			return name
		}
	}
	return ""
}
