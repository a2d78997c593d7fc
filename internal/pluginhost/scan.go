package pluginhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// scanDir returns the executable files under dir, recursively, sorted.
// Files that are not executable are reported, since a plugin copied
// without its exec bit is a common mistake that would otherwise be silent.
// A missing dir has no plugins.
func scanDir(dir string) (binaries []string, skipped []string, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := os.Stat(path) // follows symlinks, as exec would
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", path, err))
			return nil
		}
		switch {
		case !info.Mode().IsRegular():
			skipped = append(skipped, path+": not a regular file")
		case info.Mode().Perm()&0o111 == 0:
			skipped = append(skipped, path+": not executable (chmod +x it to use it as a plugin)")
		default:
			binaries = append(binaries, path)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("scanning plugin dir %s: %w", dir, err)
	}
	sort.Strings(binaries)
	return binaries, skipped, nil
}
