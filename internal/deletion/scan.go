package deletion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// tarItem is one item of the tarball as DeleteItemActions receive it.
type tarItem struct {
	pos  int64
	ref  archive.ItemRef
	gr   schema.GroupResource
	data []byte

	labels       map[string]string
	labelsParsed bool
}

// Item names an item of the tarball and its position.
type Item struct {
	// Position is the item's number among the tarball's items (from 0), the
	// unit of a deletion's checkpoints.
	Position int64 `json:"position"`
	// Resource is the group-resource ("configmaps", "deployments.apps").
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (it *tarItem) item() Item {
	return Item{Position: it.pos, Resource: it.ref.GroupResource, Namespace: it.ref.Namespace, Name: it.ref.Name}
}

// itemLabels decodes only the item's labels, once: an item that no action
// can match is never decoded at all.
func (it *tarItem) itemLabels() map[string]string {
	if !it.labelsParsed {
		it.labelsParsed = true
		var head struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		// An item that does not decode has no labels; the action that gets
		// it is the one to complain.
		if json.Unmarshal(it.data, &head) == nil {
			it.labels = head.Metadata.Labels
		}
	}
	return it.labels
}

// errNoTarball says the backup has no tarball in the store.
var errNoTarball = errors.New("the backup's tarball is not in the store")

// isDeletable reports whether an entry is a copy of an item that Velero
// hands to DeleteItemActions. Velero extracts the tarball and walks
// resources/<resource>/cluster/ and resources/<resource>/namespaces/<ns>/
// only, so it passes the plain copy of each item and never the copy under
// <version>-preferredversion/ (nor an item stored only under a
// non-preferred version's directory). Lifeboat does the same, so an action
// sees each item once, exactly as it would under Velero.
func isDeletable(e archive.Entry) bool {
	return e.Item != nil && !e.PreferredVersionCopy && e.Item.Version == ""
}

// scan streams backup's tarball and calls fn for each item DeleteItemActions
// can receive, in tarball order, numbered from 0. Nothing is written to
// disk and only one item is held at a time (plus what fn keeps). A tarball
// that is not in the store gives errNoTarball; a broken or hostile one, or
// a storage failure while reading, another error.
func scan(ctx context.Context, store *storage.BackupStore, backup string, limits archive.Limits, fn func(*tarItem) error) error {
	rc, err := store.GetBackupContents(ctx, backup)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %w", errNoTarball, err)
	}
	if err != nil {
		return fmt.Errorf("reading the tarball of backup %s: %w", backup, err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, limits)
	if err != nil {
		return fmt.Errorf("reading the tarball of backup %s: %w", backup, err)
	}
	var pos int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tarball of backup %s: %w", backup, err)
		}
		if !isDeletable(e) {
			continue
		}
		it := &tarItem{pos: pos, ref: *e.Item, gr: schema.ParseGroupResource(e.Item.GroupResource), data: e.Data}
		pos++
		if err := fn(it); err != nil {
			return err
		}
	}
}

// scanAhead is scan with the tarball read on a goroutine of its own, up to
// readAhead items ahead of fn: reading (gunzip, untar) is most of a scan's
// work, and fn's (matching, handing items to workers) then runs beside it
// rather than after it. fn is called on the caller's goroutine, in order.
func scanAhead(ctx context.Context, store *storage.BackupStore, backup string, limits archive.Limits, fn func(*tarItem) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan *tarItem, readAhead)
	read := make(chan error, 1)
	go func() {
		defer close(items)
		read <- scan(ctx, store, backup, limits, func(it *tarItem) error {
			select {
			case items <- it:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for it := range items {
		if err := fn(it); err != nil {
			// The reader stops at the cancellation; fn's error is the
			// cause, and a read that failed on its own is said beside it.
			cancel()
			for range items {
			}
			if readErr := <-read; readErr != nil && !errors.Is(readErr, context.Canceled) {
				return errors.Join(err, readErr)
			}
			return err
		}
	}
	return <-read
}

// readAhead bounds the items read and not yet handed to fn: about 1.5 KiB
// each in a typical backup.
const readAhead = 256
