package dashboard

import (
	"context"
	"errors"

	"github.com/bridged-app/bridged/internal/approvals"
)

// ServiceApprovals shows the approval service's open requests on the
// dashboard and takes its decisions, with the same rules as the command
// line (approvals.Service.Decide).
func ServiceApprovals(s *approvals.Service) Approvals { return serviceApprovals{s} }

type serviceApprovals struct{ s *approvals.Service }

// List returns the open requests, newest first.
func (a serviceApprovals) List(ctx context.Context) ([]Approval, error) {
	open, err := a.s.List(ctx, true, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Approval, 0, len(open))
	for _, r := range open {
		out = append(out, Approval{
			ID: r.ID, Group: string(r.Folder), Action: r.Tool, Detail: r.Subject,
			AskedAt: r.AskedAt, Expires: r.AskedAt.Add(a.s.Timeout()),
		})
	}
	return out, nil
}

// Decide settles request id once: a request settled before is ErrDecided,
// an unknown id store.ErrNotFound.
func (a serviceApprovals) Decide(ctx context.Context, id string, allow, always bool, by string) error {
	_, err := a.s.Decide(ctx, id, allow, always, by)
	if errors.Is(err, approvals.ErrSettled) {
		return decided{err}
	}
	return err
}

// decided is approvals' ErrSettled as the dashboard knows it: its text is
// the approvals' own, and it is ErrDecided too.
type decided struct{ error }

func (d decided) Unwrap() []error { return []error{d.error, ErrDecided} }
