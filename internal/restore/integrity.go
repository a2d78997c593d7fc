package restore

import (
	"context"
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// checkIntegrity compares the backup's files with the digests the backup
// wrote, before anything is created, all but the tarball: it returns the
// tarball's recorded digest, which the spool's one reading of it must
// match (differences then named by tarballDiffers).
func (r *run) checkIntegrity(ctx context.Context) (storage.FileDigest, error) {
	anchor := r.b.Annotations[v1.DigestsAnnotation]
	var rep integrity.Report
	var err error
	if r.rs.Annotations[v1.IgnoreIntegrityAnnotation] == "true" {
		// The findings are to become warnings: they must be known before
		// the read, so the tarball is checked whole first.
		rep, err = integrity.Check(ctx, r.store, r.b.Name, anchor, r.e.Limits)
	} else {
		rep, err = integrity.CheckAllButTarball(ctx, r.store, r.b.Name, anchor)
	}
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

// tarballDiffers runs the whole check once the spool's reading of the
// tarball failed (it did not match its digest, or could not be read as
// written): the error names what differs, as a check before the read
// would have. nil when the check finds nothing (the read failed for
// another reason, which the caller reports).
func (r *run) tarballDiffers(ctx context.Context) error {
	rep, err := integrity.Check(ctx, r.store, r.b.Name, r.b.Annotations[v1.DigestsAnnotation], r.e.Limits)
	if err != nil || rep.Verified() || rep.NoDigests {
		return nil
	}
	return fmt.Errorf("%s; nothing was restored (to restore it anyway, annotate the Restore %s=true)", rep.Summary(), v1.IgnoreIntegrityAnnotation)
}
