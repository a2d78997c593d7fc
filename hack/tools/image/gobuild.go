package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const versionVar = "github.com/lifeboat-io/lifeboat/internal/buildinfo.Version"

// compile builds programs for one platform into dir, one `go build` per
// module, the way the Makefile builds the binary (static, -trimpath, the
// version stamped, symbols stripped), and returns each program's path by
// name. Go's build cache makes a second run cheap.
func compile(ctx context.Context, root string, plat v1.Platform, version string, progs []program, dir string) (map[string]string, error) {
	byModule := map[string][]string{}
	for _, p := range progs {
		if !slices.Contains(byModule[p.Module], p.Package) {
			byModule[p.Module] = append(byModule[p.Module], p.Package)
		}
	}
	modules := make([]string, 0, len(byModule))
	for m := range byModule {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range modules {
		pkgs := byModule[m]
		args := append([]string{"build", "-trimpath",
			"-ldflags", "-s -w -X " + versionVar + "=" + version,
			"-o", dir + string(filepath.Separator)}, pkgs...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = filepath.Join(root, m)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
		if b, err := cmd.CombinedOutput(); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("go build for %s: interrupted", platformString(plat))
			}
			return nil, fmt.Errorf("go build for %s in %s: %w\n%s", platformString(plat), cmd.Dir, err, b)
		}
		for _, p := range pkgs {
			out[path.Base(p)] = filepath.Join(dir, path.Base(p))
		}
	}
	return out, nil
}

// examplePlugins lists the names of the main packages under
// examples/plugins: each is a plugin binary that gets an image.
func examplePlugins(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, examplePluginsPattern)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the example plugins: %w", exitErr(err))
	}
	var names []string
	for _, line := range strings.Fields(string(b)) {
		names = append(names, path.Base(line))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no main package under %s in %s", examplePluginsPattern, root)
	}
	return names, nil
}

// commit is what the images say about the source they were built from.
type commit struct {
	Revision string    // full commit id
	Time     time.Time // committer time: the images' creation time
	Describe string    // git describe --tags --always --dirty: the default version
}

func headCommit(ctx context.Context, root string) (commit, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s (the images are stamped with the commit they are built from): %w", strings.Join(args, " "), root, exitErr(err))
		}
		return strings.TrimSpace(string(b)), nil
	}
	var c commit
	var err error
	if c.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return c, err
	}
	unix, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return c, err
	}
	secs, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return c, fmt.Errorf("commit time %q: %w", unix, err)
	}
	c.Time = time.Unix(secs, 0).UTC()
	if c.Describe, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
		return c, err
	}
	return c, nil
}

// exitErr adds a failed command's standard error to its error.
func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

func platformString(p v1.Platform) string { return p.OS + "/" + p.Architecture }
