package restore

import (
	"context"
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// checkIntegrity compares the backup's files, and each entry of its
// tarball, with the digests the backup wrote, before anything is created.
// It returns the tarball's checked digest, which the spool's reading of it
// must match.
func (r *run) checkIntegrity(ctx context.Context) (storage.FileDigest, error) {
	rep, err := integrity.Check(ctx, r.store, r.b.Name, r.b.Annotations[v1.DigestsAnnotation], r.e.Limits)
	if err != nil {
		return storage.FileDigest{}, fmt.Errorf("checking backup %q against its digests: %w", r.b.Name, err)
	}
	switch {
	case rep.NoDigests:
		r.log.Info("not verified: " + rep.Summary())
	case rep.Verified():
		r.log.Info("backup verified against its digests", "summary", rep.Summary())
	case r.rs.Annotations[v1.IgnoreIntegrityAnnotation] == "true":
		r.log.Warn("restoring a backup that failed its integrity check, as annotation "+v1.IgnoreIntegrityAnnotation+" asks", "summary", rep.Summary())
		for _, f := range rep.Findings {
			r.results.Warning("", "integrity check: "+f.String())
		}
		if rep.MoreFindings > 0 {
			r.results.Warning("", fmt.Sprintf("integrity check: %d more differences", rep.MoreFindings))
		}
		// What was found is known; the tarball is read as it is now.
		return storage.FileDigest{}, nil
	default:
		return storage.FileDigest{}, fmt.Errorf("%s; nothing was restored (to restore it anyway, annotate the Restore %s=true)", rep.Summary(), v1.IgnoreIntegrityAnnotation)
	}
	return rep.Tarball, nil
}
