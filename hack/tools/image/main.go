// Command image builds Lifeboat's container images without a container
// engine: it compiles static Go programs with `go build` for each platform
// and assembles them, with go-containerregistry, into multi-platform OCI
// images on an empty base:
//
//   - lifeboat: the lifeboat binary (server and CLI), entry point /lifeboat;
//   - lifeboat-plugin-<name>: one per example plugin, Velero's plugin image
//     convention (the entry point copies /plugins/* into /target);
//   - pause: the sandbox image of Lifeboat's test node;
//   - lifeboat-demo-writer: the demo's workload that writes to a volume.
//
// Each image is written as an OCI layout (-o) and/or an archive of one that
// `ctr images import` reads (-tar), and can be imported into a containerd
// (-import-address). The same commit gives the same digests. See
// docs/images.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type options struct {
	Root          string
	Version       string // empty: git describe, as the Makefile computes it
	Repo          string
	Platforms     []v1.Platform
	Only          []string // image names; empty: all
	LayoutDir     string
	TarDir        string
	CABundle      string
	Busybox       string
	ImportAddress string
	Ctr           string
}

func main() {
	var o options
	var platforms, only string
	fl := flag.NewFlagSet("image", flag.ExitOnError)
	fl.StringVar(&o.Root, "root", "", "the repository's root (default: the git work tree around the current directory)")
	fl.StringVar(&o.Version, "version", "", "Lifeboat's version: the images' tag and the binaries' version (default: git describe --tags --always --dirty, as the Makefile)")
	fl.StringVar(&o.Repo, "repo", "ghcr.io/lifeboat-io", "prefix of the images' repositories")
	fl.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", `platforms to build, comma-separated, or "local" for this machine's only (faster)`)
	fl.StringVar(&only, "images", "", "build only these images, comma-separated (e.g. lifeboat,pause; default: all)")
	fl.StringVar(&o.LayoutDir, "o", "", "write each image as an OCI layout in DIR/<image>/")
	fl.StringVar(&o.TarDir, "tar", "", "write each image as DIR/<image>.tar, an OCI layout archive for `ctr images import`")
	fl.StringVar(&o.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates (PEM) copied into the images (Debian's ca-certificates package)")
	fl.StringVar(&o.Busybox, "busybox", "/bin/busybox", "a static busybox copied into the test shell image (Debian's busybox-static)")
	fl.StringVar(&o.ImportAddress, "import-address", "", "after writing the archives (-tar), import them into the containerd at this socket, namespace k8s.io")
	fl.StringVar(&o.Ctr, "ctr", "ctr", "the ctr program used by -import-address")
	_ = fl.Parse(os.Args[1:])
	if fl.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q: every input is a flag (-h lists them)", fl.Args()))
	}
	var err error
	if o.Platforms, err = parsePlatforms(platforms); err != nil {
		fail(err)
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
	}
	// Interrupted, the build stops and still removes its temporary files.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	images, err := build(ctx, o, os.Stderr)
	if err != nil {
		fail(err)
	}
	for _, b := range images {
		fmt.Printf("%s\t%s\t%s\t%s\n", b.Spec.Ref, b.Digest, humanSize(b.Size), b.Output)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// built is one image the builder wrote.
type built struct {
	Spec   imageSpec
	Digest v1.Hash // of the image index: the digest a node or registry knows it by
	Size   int64   // of its blobs, compressed (what a node stores)
	Layout string  // its OCI layout directory (removed at the end unless -o)
	Output string  // where it was written: the archive, else the layout
}

// build compiles, assembles and writes the images o asks for, logging its
// steps to log.
func build(ctx context.Context, o options, log io.Writer) ([]built, error) {
	if o.LayoutDir == "" && o.TarDir == "" {
		return nil, errors.New("nowhere to write the images: give -o DIR (OCI layouts) and/or -tar DIR (archives)")
	}
	if o.ImportAddress != "" && o.TarDir == "" {
		return nil, errors.New("-import-address imports the archives: give -tar DIR too")
	}
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform to build for")
	}
	var err error
	if o.Root == "" {
		if o.Root, err = gitTopLevel(ctx); err != nil {
			return nil, err
		}
	}
	src, err := headCommit(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	if o.Version == "" {
		o.Version = src.Describe
	}
	if !validTag.MatchString(o.Version) {
		return nil, fmt.Errorf("-version %q cannot be an image tag (letters, digits, '_', '.', '-'; at most 128; no leading '.' or '-')", o.Version)
	}
	plugins, err := examplePlugins(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	pauseVersion, err := os.ReadFile(filepath.Join(o.Root, imageModule, "pause", "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("the pause program's version: %w", err)
	}
	specs, err := selectImages(plan(planInput{
		Repo:         o.Repo,
		Version:      o.Version,
		PauseVersion: strings.TrimSpace(string(pauseVersion)),
		Plugins:      plugins,
		CABundle:     o.CABundle,
		Busybox:      o.Busybox,
	}), o.Only)
	if err != nil {
		return nil, err
	}

	// Files of this machine are read after the (long) compile: find a
	// missing one now.
	for _, s := range specs {
		for _, layer := range s.Layers {
			for _, e := range layer {
				if e.HostFile == "" {
					continue
				}
				if _, err := content(e, nil); err != nil {
					return nil, fmt.Errorf("image %s, /%s: %w", s.Name, e.Path, err)
				}
			}
		}
	}

	work, err := os.MkdirTemp("", "lifeboat-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	// Compile every program once per platform.
	known := programIndex(plugins)
	var progs []program
	for _, s := range specs {
		for _, name := range programsOf(s) {
			if !slices.Contains(progs, known[name]) {
				progs = append(progs, known[name])
			}
		}
	}
	binaries := make([]map[string]string, len(o.Platforms))
	for i, plat := range o.Platforms {
		start := time.Now()
		dir := filepath.Join(work, plat.OS+"_"+plat.Architecture)
		if binaries[i], err = compile(ctx, o.Root, plat, o.Version, progs, dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "compiled %d programs for %s in %s\n", len(progs), platformString(plat), time.Since(start).Round(100*time.Millisecond))
	}

	for _, dir := range []string{o.LayoutDir, o.TarDir} {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
		}
	}
	var out []built
	for _, s := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		b, err := writeImage(s, o, binaries, src, work)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "assembled %s in %s\n", s.Ref, time.Since(start).Round(100*time.Millisecond))
		if o.ImportAddress != "" {
			if err := importTar(ctx, o.Ctr, o.ImportAddress, b.Output); err != nil {
				return nil, fmt.Errorf("importing %s into containerd: %w", s.Ref, err)
			}
			fmt.Fprintf(log, "imported %s into containerd at %s (namespace k8s.io)\n", s.Ref, o.ImportAddress)
		}
		if o.LayoutDir == "" {
			b.Layout = ""
		}
		out = append(out, b)
	}
	return out, nil
}

func writeImage(s imageSpec, o options, binaries []map[string]string, src commit, work string) (built, error) {
	idx, err := assembleIndex(s, o.Platforms, binaries, src)
	if err != nil {
		return built{}, err
	}
	b := built{Spec: s}
	if b.Digest, err = idx.Digest(); err != nil {
		return b, err
	}
	b.Layout = filepath.Join(work, "layouts", s.Name)
	if o.LayoutDir != "" {
		b.Layout = filepath.Join(o.LayoutDir, s.Name)
	}
	if err := writeLayout(b.Layout, s.Ref, idx); err != nil {
		return b, err
	}
	if b.Size, err = blobsSize(b.Layout); err != nil {
		return b, err
	}
	b.Output = b.Layout
	if o.TarDir != "" {
		b.Output = filepath.Join(o.TarDir, s.Name+".tar")
		if err := tarLayout(b.Layout, b.Output, src.Time); err != nil {
			return b, fmt.Errorf("archiving %s: %w", s.Ref, err)
		}
	}
	return b, nil
}

// validTag is the grammar of a tag in the OCI distribution spec.
var validTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// selectImages keeps the images named in only (all when it is empty).
func selectImages(specs []imageSpec, only []string) ([]imageSpec, error) {
	if len(only) == 0 {
		return specs, nil
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	var out []imageSpec
	for _, name := range only {
		i := slices.Index(names, strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("-images: no image %q; the images are %s", name, strings.Join(names, ", "))
		}
		out = append(out, specs[i])
	}
	return out, nil
}

// parsePlatforms reads -platforms: os/arch pairs, or "local".
func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "local" {
			p = "linux/" + runtime.GOARCH
		}
		osName, arch, ok := strings.Cut(p, "/")
		if !ok || osName != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("-platforms: %q is not linux/<arch> (e.g. linux/amd64,linux/arm64) or local", p)
		}
		plat := v1.Platform{OS: osName, Architecture: arch}
		if !slices.ContainsFunc(out, plat.Equals) {
			out = append(out, plat)
		}
	}
	return out, nil
}

func gitTopLevel(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root (or give -root): %w", exitErr(err))
	}
	return strings.TrimSpace(string(b)), nil
}

// blobsSize adds up the sizes of a layout's blobs.
func blobsSize(layoutDir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(filepath.Join(layoutDir, "blobs"), func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	return total, err
}

func humanSize(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
