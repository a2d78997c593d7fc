// Package restorehelper is what the restore-wait init container runs
// (`lifeboat restore-helper`, Velero's velero-restore-helper): it holds a
// restored pod's own containers back until the node agent has written
// every file-system restored volume's data.
package restorehelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DoneDir is the directory, in each restored volume, of the done markers
// the node agent writes: one empty file named after the Restore's UID.
const DoneDir = ".velero"

// Wait returns once every directory under root (one per volume mounted by
// the wait container, /restores/<volume>) holds DoneDir/<restoreUID>,
// looking every interval; it then removes DoneDir from each, as Velero's
// helper does, so the marker never shows in the application's data. A
// failed removal is reported on out but does not fail the wait: the data
// is restored. It stops with ctx.
func Wait(ctx context.Context, root, restoreUID string, interval time.Duration, out io.Writer) error {
	if restoreUID == "" || filepath.Base(restoreUID) != restoreUID || restoreUID == "." || restoreUID == ".." {
		return fmt.Errorf("the restore's UID %q is not a file name", restoreUID)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		dirs, missing := check(root, restoreUID, out)
		if missing == "" {
			fmt.Fprintln(out, "all pod volume restores are done")
			for _, d := range dirs {
				if err := os.RemoveAll(filepath.Join(d, DoneDir)); err != nil {
					fmt.Fprintf(out, "removing %s: %v\n", filepath.Join(d, DoneDir), err)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still waiting for %s: %w", missing, ctx.Err())
		case <-t.C:
		}
	}
}

// check reports the volume directories and the first missing marker
// ("" when none is missing).
func check(root, uid string, out io.Writer) ([]string, string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		fmt.Fprintf(out, "reading %s: %v\n", root, err)
		return nil, root
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		marker := filepath.Join(dir, DoneDir, uid)
		if _, err := os.Stat(marker); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(out, "looking for %s: %v\n", marker, err)
			}
			return nil, marker
		}
		dirs = append(dirs, dir)
	}
	return dirs, ""
}
