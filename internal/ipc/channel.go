package ipc

// The IPC channel (decision record 42): on the kubernetes engine the runner
// and its MCP server reach the host over the credential proxy's TCP
// channel (EnvAPIAddr, each connection opened with the run's token, which
// names the group on the host), in place of the files of the IPC directory.
// The bodies are those of the files: a request is a request file's JSON,
// its answer a response file's; the input stream carries input files.
const (
	// ChannelRequest takes one request (POST, the JSON of a request file,
	// at most the host's bound) and answers with its response's JSON. A
	// request id sent again (a dropped connection) gets the answer of its
	// first sending; it is carried out once.
	ChannelRequest = "/ipc/request"
	// ChannelInput (GET) streams the run's follow-up input as
	// newline-separated ChannelItem objects: every input the host holds
	// for the group that this stream has not sent yet, in the order it was
	// written, then the close item once the host asks the run to close.
	// Items stay with the host until acknowledged (ChannelAck): a new
	// stream sends them again, and the runner skips what it took.
	ChannelInput = "/ipc/input"
	// ChannelAck (POST, a ChannelItem with its Name) tells the host the
	// runner took the input of that name (or the close); the host then
	// forgets it.
	ChannelAck = "/ipc/ack"
	// EnvChannel names the IPC channel's base URL to the MCP server (the
	// runner's loopback forwarder, which adds the token).
	EnvChannel = "BRIDGED_MCP_IPC_URL"
)

// ChannelItem is one line of the input stream, and an acknowledgement.
type ChannelItem struct {
	// Name is the input's name at the host; it sorts in the order the
	// inputs were written. CloseName for the close.
	Name string `json:"name"`
	// Text is a follow-up message's text (empty for the close).
	Text string `json:"text,omitempty"`
}
