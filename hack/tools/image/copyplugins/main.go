// Command copy-plugins is the entry point of Lifeboat's plugin images. It
// runs as an init container of the server's pod, copies every file of the
// image's plugin directory (/plugins) into the volume the server reads its
// plugins from (mounted at /target in the init container), and exits: the
// same convention as Velero's plugin images, so `velero install --plugins`
// style Deployments work with these images unchanged.
//
// Each file is written under a temporary name and renamed into place, so a
// server (or a restarted init container) never sees half a binary, and a
// file left over by a crash is not executable, which the server's plugin
// scan reports instead of running.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

func main() {
	fl := flag.NewFlagSet("copy-plugins", flag.ExitOnError)
	from := fl.String("from", "/plugins", "directory whose files are copied")
	to := fl.String("to", "/target", "directory to copy them into (the server's plugin volume)")
	_ = fl.Parse(os.Args[1:])
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	copied, err := copyPlugins(*from, *to)
	for _, c := range copied {
		log.Info("copied plugin", "from", c.From, "to", c.To, "bytes", c.Bytes, "mode", c.Mode.String())
	}
	if err != nil {
		log.Error("copying plugins failed", "err", err)
		os.Exit(1)
	}
}

// copied is one file copyPlugins put in place.
type copied struct {
	From, To string
	Bytes    int64
	Mode     fs.FileMode
}

// copyPlugins copies the regular files directly in from into to, keeping
// their permission bits, and returns what it copied, in name order. It
// stops at the first failure. Subdirectories and other kinds of files are
// refused rather than skipped: a plugin image that holds them was built
// wrong, and a silent skip would leave the server without a plugin.
func copyPlugins(from, to string) ([]copied, error) {
	info, err := os.Stat(to)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("target directory %s does not exist: mount the server's plugins volume there (an emptyDir shared with the server's /plugins)", to)
	case err != nil:
		return nil, fmt.Errorf("target directory: %w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("target %s is not a directory", to)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin directory: %w", err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("plugin directory %s is empty: the image holds no plugin", from)
	}
	var done []copied
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return done, fmt.Errorf("%s is not a regular file: a plugin image keeps its plugin binaries directly in %s", filepath.Join(from, e.Name()), from)
		}
		c, err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
		if err != nil {
			return done, err
		}
		done = append(done, c)
	}
	return done, nil
}

// copyFile copies src to dst through a temporary file in dst's directory
// and a rename, so dst is either the old file or the whole new one.
func copyFile(src, dst string) (c copied, err error) {
	in, err := os.Open(src)
	if err != nil {
		return c, err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return c, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return c, fmt.Errorf("copying %s: %w", src, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, in)
	if err != nil {
		return c, fmt.Errorf("copying %s to %s: %w", src, tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return c, fmt.Errorf("copying %s: %w", src, err)
	}
	// Chmod after the data is written: until then the temporary file is
	// not executable (CreateTemp makes it 0600).
	if err = tmp.Chmod(info.Mode().Perm()); err != nil {
		return c, fmt.Errorf("copying %s: %w", src, err)
	}
	if err = tmp.Close(); err != nil {
		return c, fmt.Errorf("copying %s: %w", src, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return c, fmt.Errorf("copying %s: %w", src, err)
	}
	return copied{From: src, To: dst, Bytes: n, Mode: info.Mode().Perm()}, nil
}
