package deletion

import (
	"context"
	"errors"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// removeUnfinishedUploads removes the uploads into the backup's or a
// restore's directory (name) that a server stopped in the middle of, and
// counts them. They are not keys, so the key steps cannot see them, and
// without this the report would say nothing is left while they stay. A
// store that cannot find them (one served by a plugin: Velero's plugin API
// has no such call) leaves them to its own lifecycle rules.
func (r *run) removeUnfinishedUploads(ctx context.Context, remove func(context.Context, string) ([]string, error), name string, step v1.DeletionStep) error {
	removed, err := remove(ctx, name)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if len(removed) > 0 {
		r.mu.Lock()
		r.state.UnfinishedUploadsRemoved += int64(len(removed))
		r.dirty = true
		r.mu.Unlock()
		r.log.Info("removed uploads a stopped server left unfinished", "step", step, "name", name, "uploads", removed)
	}
	if err != nil {
		r.leftBehind("unfinished uploads of " + name)
		de := v1.DeletionError{Step: step, Message: err.Error()}
		if step == v1.DeletionStepRestores {
			de.Name = name
		}
		return r.fail(de)
	}
	return nil
}
