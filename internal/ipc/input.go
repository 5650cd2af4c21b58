package ipc

// InputType is the type of a follow-up input file.
type InputType string

// InputMessage is the only input type: a follow-up user turn.
const InputMessage InputType = "message"

// Input is input/<seq>.json: {"type":"message","text":"…"}.
type Input struct {
	Type InputType `json:"type"`
	Text string    `json:"text"`
}

// Validate reports whether the input can be fed to the agent.
func (in Input) Validate() error {
	if in.Type != InputMessage {
		return invalidf("unknown input type %q", in.Type)
	}
	return checkText("text", in.Text, true)
}

// DecodeInput decodes and validates an input file.
func DecodeInput(data []byte) (Input, error) {
	var in Input
	if err := decodeStrict(data, &in); err != nil {
		return Input{}, err
	}
	return in, in.Validate()
}
