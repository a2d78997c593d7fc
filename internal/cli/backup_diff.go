package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/backupdiff"
)

// newBackupDiffCommand builds `backup diff`: which items two backups do
// not share, and which differ, and with --item how one item's fields do.
func newBackupDiffCommand(f *Factory) *cobra.Command {
	var (
		item         string
		fromContents bool
		timeout      time.Duration
		tlsOpts      *tlsFlags
	)
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "List the items added, removed and changed between two backups",
		Long: `Compares two backups item by item, by the digest of each item's stored JSON,
and prints each item only one of them holds (+ added in NEW, - removed from
OLD) and each item that differs (~), then the counts. Items are named as
"resource.group namespace/name" ("resource.group name" at cluster scope).

The digests come from each backup's item digests file (docs/integrity.md),
read through the server; a backup without one (written by Velero, or by a
Lifeboat before digests) is read whole and hashed instead, as is every
backup with --from-contents. Memory stays the same at any size: both lists
are sorted on local disk. The digests files are what the backups recorded;
` + "`backup verify`" + ` checks that the stored items still match them.

--item RESOURCE/NAMESPACE/NAME (RESOURCE/NAME at cluster scope) also prints
the fields of that item that differ, reading both tarballs.`,
		Args: cobra.ExactArgs(2),
		Example: `  lifeboat backup diff nightly-20261206010000 nightly-20261207010000
  lifeboat backup diff nightly-20261206010000 nightly-20261207010000 --item configmaps/shop/settings`,
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			var itemKey string
			if item != "" {
				k, err := parseItemFlag(item)
				if err != nil {
					return err
				}
				itemKey = k
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var sides [2]diffSide
			for i, name := range args {
				b, err := backupKind.get(ctx, c, f.Namespace, name)
				if err != nil {
					return err
				}
				d, err := f.storeDownloader(ctx, c, timeout, tlsOpts, b.Spec.StorageLocation, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				sides[i] = diffSide{name: b.Name, d: d}
			}
			out := cmd.OutOrStdout()
			if err := printItemDiff(ctx, out, cmd.ErrOrStderr(), sides, fromContents); err != nil {
				return err
			}
			if itemKey != "" {
				return printFieldDiff(ctx, out, sides, itemKey)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&item, "item", "", "also print the fields that differ in this item: RESOURCE/NAMESPACE/NAME, or RESOURCE/NAME at cluster scope (e.g. configmaps/shop/settings, deployments.apps/shop/web)")
	cmd.Flags().BoolVar(&fromContents, "from-contents", false, "hash both tarballs instead of reading the item digests files")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve each file")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
	return cmd
}

// diffSide is one of the two backups and the downloader of its location.
type diffSide struct {
	name string
	d    *downloader
}

// parseItemFlag turns RESOURCE/NAMESPACE/NAME or RESOURCE/NAME into the
// key the diff names items by.
func parseItemFlag(s string) (string, error) {
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("--item %q: give RESOURCE/NAMESPACE/NAME, or RESOURCE/NAME for a cluster-scoped item, e.g. configmaps/shop/settings", s)
		}
	}
	switch len(parts) {
	case 2:
		return backupdiff.Key(archive.ItemRef{GroupResource: parts[0], Name: parts[1]}), nil
	case 3:
		return backupdiff.Key(archive.ItemRef{GroupResource: parts[0], Namespace: parts[1], Name: parts[2]}), nil
	}
	return "", fmt.Errorf("--item %q: give RESOURCE/NAMESPACE/NAME, or RESOURCE/NAME for a cluster-scoped item, e.g. configmaps/shop/settings", s)
}

// printItemDiff streams the differences as the merge finds them.
func printItemDiff(ctx context.Context, out, warn io.Writer, sides [2]diffSide, fromContents bool) error {
	var sources [2]backupdiff.Source
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	for i, s := range sides {
		rc, src, err := s.source(ctx, warn, fromContents)
		if err != nil {
			return err
		}
		closers = append(closers, rc)
		sources[i] = src
	}
	fmt.Fprintf(out, "Backup %s -> backup %s:\n", sides[0].name, sides[1].name)
	marks := map[backupdiff.ChangeKind]string{backupdiff.Added: "+", backupdiff.Removed: "-", backupdiff.Changed: "~"}
	res, err := backupdiff.Diff(sources[0], sources[1], "", func(c backupdiff.Change) error {
		_, err := fmt.Fprintf(out, "  %s %s\n", marks[c.Kind], c.Key)
		return err
	})
	if err != nil {
		return fmt.Errorf("comparing backups %s and %s: %w", sides[0].name, sides[1].name, err)
	}
	fmt.Fprintf(out, "%d added, %d removed, %d changed, %d unchanged.\n", res.Added, res.Removed, res.Changed, res.Unchanged)
	return nil
}

// source opens the backup's item digests file, or its tarball when it has
// none (or when asked to).
func (s diffSide) source(ctx context.Context, warn io.Writer, fromContents bool) (io.Closer, backupdiff.Source, error) {
	if !fromContents {
		rc, err := s.d.open(ctx, v1.DownloadTargetKindBackupItemDigests, s.name)
		switch {
		case err == nil:
			return rc, backupdiff.FromItemDigests(rc), nil
		case errors.Is(err, errFileNotFound):
			fmt.Fprintf(warn, "Backup %s has no item digests (written by Velero, or before Lifeboat recorded them): reading its tarball.\n", s.name)
		case apierrors.IsInvalid(err):
			// Velero's DownloadRequest CRD does not take the kind.
			fmt.Fprintf(warn, "The cluster's DownloadRequest CRD does not serve item digests (run `lifeboat install --crds-only`): reading the tarball of backup %s.\n", s.name)
		default:
			return nil, nil, err
		}
	}
	rc, err := s.d.open(ctx, v1.DownloadTargetKindBackupContents, s.name)
	if err != nil {
		return nil, nil, err
	}
	return rc, backupdiff.FromTarball(rc, archive.Limits{}), nil
}

// printFieldDiff reads the item from both tarballs and prints its fields
// that differ.
func printFieldDiff(ctx context.Context, out io.Writer, sides [2]diffSide, key string) error {
	var objs [2]map[string]any
	for i, s := range sides {
		data, err := s.item(ctx, key)
		if errors.Is(err, backupdiff.ErrItemNotFound) {
			fmt.Fprintf(out, "\n%s: not in backup %s\n", key, s.name)
			return nil
		}
		if err != nil {
			return err
		}
		if err := utiljson.Unmarshal(data, &objs[i]); err != nil {
			return fmt.Errorf("item %s of backup %s: %w", key, s.name, err)
		}
	}
	changes := backupdiff.Fields(objs[0], objs[1])
	fmt.Fprintf(out, "\n%s: %d fields differ\n", key, len(changes))
	for _, ch := range changes {
		switch ch.Kind {
		case backupdiff.Added:
			fmt.Fprintf(out, "  + %s: %s\n", ch.Path, shortJSON(ch.New))
		case backupdiff.Removed:
			fmt.Fprintf(out, "  - %s: %s\n", ch.Path, shortJSON(ch.Old))
		default:
			fmt.Fprintf(out, "  ~ %s: %s -> %s\n", ch.Path, shortJSON(ch.Old), shortJSON(ch.New))
		}
	}
	return nil
}

func (s diffSide) item(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.d.open(ctx, v1.DownloadTargetKindBackupContents, s.name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := backupdiff.FindItem(rc, archive.Limits{}, key)
	if err != nil && !errors.Is(err, backupdiff.ErrItemNotFound) {
		return nil, fmt.Errorf("reading the tarball of backup %s: %w", s.name, err)
	}
	return data, err
}

// shortJSON renders a value on one line, cut at a length a terminal shows.
func shortJSON(v any) string {
	const limit = 200
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(data) > limit {
		return string(data[:limit]) + "…"
	}
	return string(data)
}
