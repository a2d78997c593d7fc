package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// These tests build the images for real (go build, assembly, archives)
// and read them back as containerd would get them: from the archive. To
// stay quick they build for this machine's platform only, except the one
// test that builds the lifeboat image for both platforms.

const testVersion = "v0.0.0-test"

var (
	localPlatform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	elfMachine    = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	hostCABundle  = "/etc/ssl/certs/ca-certificates.crt"
)

// shared is the one build of every image for the local platform that most
// tests read.
var shared struct {
	once   sync.Once
	dir    string
	images []built
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func localBuild(t *testing.T) []built {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "image-test-"); shared.err != nil {
			return
		}
		shared.images, shared.err = buildTo(shared.dir, []v1.Platform{localPlatform})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.images
}

func buildTo(dir string, platforms []v1.Platform, only ...string) ([]built, error) {
	return build(context.Background(), options{
		Root:      repoRoot(),
		Version:   testVersion,
		Repo:      "example.test/lifeboat-io",
		Platforms: platforms,
		Only:      only,
		TarDir:    dir,
		CABundle:  hostCABundle,
		Busybox:   "/bin/busybox",
	}, io.Discard)
}

func TestBuildsEveryImage(t *testing.T) {
	images := localBuild(t)
	var refs []string
	for _, b := range images {
		refs = append(refs, b.Spec.Ref)
	}
	want := []string{"example.test/lifeboat-io/lifeboat:" + testVersion}
	for _, p := range []string{"annotate", "cleanup", "custom-volume", "dirstore", "filesnapshotter", "restore-point"} {
		want = append(want, "example.test/lifeboat-io/lifeboat-plugin-"+p+":"+testVersion)
	}
	want = append(want, "example.test/lifeboat-io/pause:"+pauseVersion(t), "example.test/lifeboat-io/lifeboat-demo-writer:"+testVersion,
		"example.test/lifeboat-io/lifeboat-test-shell:"+testVersion)
	if !slices.Equal(refs, want) {
		t.Errorf("built\n  %s\nwant\n  %s", strings.Join(refs, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestTestShellImage(t *testing.T) {
	b := find(t, localBuild(t), "lifeboat-test-shell")
	img := readArchive(t, b, []v1.Platform{localPlatform})[0]
	checkConfig(t, img, []string{"/bin/busybox", "sh"}, "65532:65532", testVersion, "lifeboat-test-shell")
	files := extract(t, img)
	checkBase(t, files)
	checkEntry(t, files, "bin/busybox", tar.TypeReg, 0o755, 0)
	checkStatic(t, files["bin/busybox"].data, localPlatform)
	// Named anything but busybox, it would look for an applet of that name.
	bb := filepath.Join(t.TempDir(), "busybox")
	writeFile(t, bb, files["bin/busybox"].data, 0o755)
	out := run(t, bb, "echo", "shell works")
	if strings.TrimSpace(out) != "shell works" {
		t.Errorf("busybox echo printed %q", out)
	}
}

func TestLifeboatImage(t *testing.T) {
	b := find(t, localBuild(t), "lifeboat")
	img := readArchive(t, b, []v1.Platform{localPlatform})[0]
	checkConfig(t, img, []string{"/lifeboat"}, "65532:65532", testVersion, "lifeboat")
	files := extract(t, img)
	checkBase(t, files)
	checkEntry(t, files, "lifeboat", tar.TypeReg, 0o755, 0)
	checkEntry(t, files, "plugins", tar.TypeDir, 0o755, 65532)
	checkStatic(t, files["lifeboat"].data, localPlatform)

	// The binary carries the version the image is labelled with.
	out := run(t, writeExecutable(t, files["lifeboat"].data), "version", "--client-only")
	if !strings.Contains(out, "\tVersion: "+testVersion+"\n") {
		t.Errorf("/lifeboat version printed %q, want %q", out, testVersion)
	}
}

func TestPluginImages(t *testing.T) {
	for _, b := range localBuild(t) {
		plugin, ok := strings.CutPrefix(b.Spec.Name, "lifeboat-plugin-")
		if !ok {
			continue
		}
		t.Run(plugin, func(t *testing.T) {
			img := readArchive(t, b, []v1.Platform{localPlatform})[0]
			checkConfig(t, img, []string{"/copy-plugins"}, "65532:65532", testVersion, b.Spec.Name)
			files := extract(t, img)
			checkBase(t, files)
			checkEntry(t, files, "copy-plugins", tar.TypeReg, 0o755, 0)
			checkEntry(t, files, "plugins", tar.TypeDir, 0o755, 0)
			checkEntry(t, files, "plugins/"+plugin, tar.TypeReg, 0o755, 0)
			checkStatic(t, files["copy-plugins"].data, localPlatform)
			checkStatic(t, files["plugins/"+plugin].data, localPlatform)
			if n := len(underDir(files, "plugins/")); n != 1 {
				t.Errorf("/plugins holds %d files, want the one plugin binary", n)
			}

			// The entry point does what an init container of the server's
			// pod needs: the plugin lands executable in the shared volume.
			from := filepath.Join(t.TempDir(), "plugins")
			if err := os.Mkdir(from, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(from, plugin), files["plugins/"+plugin].data, 0o755)
			target := t.TempDir()
			run(t, writeExecutable(t, files["copy-plugins"].data), "-from", from, "-to", target)
			got, err := os.ReadFile(filepath.Join(target, plugin))
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(filepath.Join(target, plugin))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, files["plugins/"+plugin].data) || info.Mode().Perm() != 0o755 {
				t.Errorf("copy-plugins left %s with %d bytes, mode %v; want the image's binary, 0755", plugin, len(got), info.Mode().Perm())
			}
		})
	}
}

func TestPauseImage(t *testing.T) {
	b := find(t, localBuild(t), "pause")
	img := readArchive(t, b, []v1.Platform{localPlatform})[0]
	checkConfig(t, img, []string{"/pause"}, "65535:65535", pauseVersion(t), "pause")
	files := extract(t, img)
	if len(files) != 1 {
		t.Errorf("the pause image holds %v, want /pause alone", keys(files))
	}
	checkEntry(t, files, "pause", tar.TypeReg, 0o755, 0)
	checkStatic(t, files["pause"].data, localPlatform)
	if out := run(t, writeExecutable(t, files["pause"].data), "-v"); strings.TrimSpace(out) != "pause "+pauseVersion(t) {
		t.Errorf("/pause -v printed %q, want the version the image is tagged with", out)
	}
}

func TestDemoWriterImage(t *testing.T) {
	b := find(t, localBuild(t), "lifeboat-demo-writer")
	img := readArchive(t, b, []v1.Platform{localPlatform})[0]
	checkConfig(t, img, []string{"/demo-writer"}, "65532:65532", testVersion, "lifeboat-demo-writer")
	files := extract(t, img)
	checkBase(t, files)
	checkEntry(t, files, "demo-writer", tar.TypeReg, 0o755, 0)
	checkStatic(t, files["demo-writer"].data, localPlatform)
}

// One build of the lifeboat image for both platforms: an index of two
// images, each with a binary for its own processor.
func TestLifeboatForBothPlatforms(t *testing.T) {
	both := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	images, err := buildTo(t.TempDir(), both, "lifeboat")
	if err != nil {
		t.Fatal(err)
	}
	for i, img := range readArchive(t, images[0], both) {
		checkConfig(t, img, []string{"/lifeboat"}, "65532:65532", testVersion, "lifeboat")
		files := extract(t, img)
		checkBase(t, files)
		checkStatic(t, files["lifeboat"].data, both[i])
	}
}

// Two builds of one commit are the same images, to the byte: same index
// digest, same archive.
func TestReproducible(t *testing.T) {
	first := find(t, localBuild(t), "lifeboat")
	again, err := buildTo(t.TempDir(), []v1.Platform{localPlatform}, "lifeboat")
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != again[0].Digest {
		t.Errorf("two builds of one commit: digests %s and %s", first.Digest, again[0].Digest)
	}
	a, err := os.ReadFile(first.Output)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(again[0].Output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of one commit wrote different archives (%d and %d bytes)", len(a), len(b))
	}
}

func TestRefusesBadOptions(t *testing.T) {
	for _, bad := range []string{"linux", "darwin/arm64", "linux/arm/v7", ""} {
		if _, err := parsePlatforms(bad); err == nil || !strings.Contains(err.Error(), "-platforms") {
			t.Errorf("parsePlatforms(%q) = %v, want an error naming -platforms", bad, err)
		}
	}
	if got, err := parsePlatforms("local,linux/" + runtime.GOARCH); err != nil || len(got) != 1 || !got[0].Equals(localPlatform) {
		t.Errorf(`parsePlatforms("local,<the same>") = %v, %v; want the local platform once`, got, err)
	}
	specs := plan(planInput{Repo: "r", Version: "v", PauseVersion: "1", Plugins: []string{"a"}})
	if _, err := selectImages(specs, []string{"lifeboat", "nope"}); err == nil || !strings.Contains(err.Error(), `no image "nope"`) {
		t.Errorf("selectImages with an unknown name: %v", err)
	}
	if _, err := build(context.Background(), options{Platforms: []v1.Platform{localPlatform}}, io.Discard); err == nil || !strings.Contains(err.Error(), "-tar DIR") {
		t.Errorf("build with no output: %v, want one asking for -o or -tar", err)
	}
	_, err := build(context.Background(), options{Root: repoRoot(), Version: "1.0+build", Platforms: []v1.Platform{localPlatform}, TarDir: t.TempDir()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot be an image tag") {
		t.Errorf("build with a version that is no tag: %v", err)
	}
	_, err = build(context.Background(), options{Root: repoRoot(), Platforms: []v1.Platform{localPlatform}, TarDir: t.TempDir(),
		Only: []string{"lifeboat"}, CABundle: filepath.Join(t.TempDir(), "missing.crt")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "apt-get install --no-install-recommends ca-certificates") {
		t.Errorf("build without CA certificates: %v, want one saying how to install them", err)
	}
}

func TestImportRunsCtrAndReportsItsError(t *testing.T) {
	// A stand-in for ctr that records its arguments and fails like ctr does
	// when containerd is not there.
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "ctr")
	writeFile(t, fake, []byte("#!/bin/sh\necho \"$@\" > "+argsFile+"\necho 'ctr: failed to dial' >&2\nexit 1\n"), 0o755)
	err := importTar(context.Background(), fake, "/run/containerd/containerd.sock", "/images/lifeboat.tar")
	if err == nil || !strings.Contains(err.Error(), "ctr: failed to dial") {
		t.Errorf("importTar = %v, want ctr's error output in it", err)
	}
	args, _ := os.ReadFile(argsFile)
	if want := "--address /run/containerd/containerd.sock -n k8s.io images import --all-platforms /images/lifeboat.tar\n"; string(args) != want {
		t.Errorf("ctr ran with %q, want %q", args, want)
	}
}

// readArchive reads an image's archive the way `ctr images import` does
// (an OCI layout in a tar: oci-layout, index.json, blobs), checks the
// name annotations and the index, validates every blob, and returns the
// image of each platform, in order.
func readArchive(t *testing.T, b built, platforms []v1.Platform) []v1.Image {
	t.Helper()
	if info, err := os.Stat(b.Output); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("archive %s: %v, want mode 0644 (ctr may run as another user)", b.Output, err)
	}
	dir := untar(t, b.Output)
	if layoutFile, err := os.ReadFile(filepath.Join(dir, "oci-layout")); err != nil || !strings.Contains(string(layoutFile), `"imageLayoutVersion": "1.0.0"`) {
		t.Fatalf("archive %s: oci-layout %q, %v", b.Output, layoutFile, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the image's index alone", len(topManifest.Manifests))
	}
	entry := topManifest.Manifests[0]
	for _, key := range []string{annotationRefName, annotationContainerdImage} {
		if entry.Annotations[key] != b.Spec.Ref {
			t.Errorf("index.json: annotation %s = %q, want %q", key, entry.Annotations[key], b.Spec.Ref)
		}
	}
	if entry.MediaType != types.OCIImageIndex || entry.Digest != b.Digest {
		t.Errorf("index.json points at %s %s, want an OCI index %s", entry.MediaType, entry.Digest, b.Digest)
	}
	idx, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("%s: %v", b.Spec.Ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("the index has %d images, want one for each of %v", len(im.Manifests), platforms)
	}
	var images []v1.Image
	for i, d := range im.Manifests {
		if d.Platform == nil || !d.Platform.Equals(platforms[i]) {
			t.Errorf("image %d is for %v, want %v", i, d.Platform, platforms[i])
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != platforms[i].OS || cf.Architecture != platforms[i].Architecture {
			t.Errorf("image %d's config says %s/%s, want %v", i, cf.OS, cf.Architecture, platforms[i])
		}
		images = append(images, img)
	}
	return images
}

func checkConfig(t *testing.T, img v1.Image, entrypoint []string, user, version, title string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	head := git(t, "rev-parse", "HEAD")
	created := commitTime(t)
	if !slices.Equal(cf.Config.Entrypoint, entrypoint) || cf.Config.User != user {
		t.Errorf("entry point %q as user %q, want %q as %q", cf.Config.Entrypoint, cf.Config.User, entrypoint, user)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": head,
		"org.opencontainers.image.source":   "https://github.com/lifeboat-io/lifeboat",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if !cf.Created.Equal(created) {
		t.Errorf("created %v, want the commit's time %v", cf.Created.Time, created)
	}
}

// checkBase checks what every image but pause has: the nonroot user, CA
// certificates, a home and /tmp.
func checkBase(t *testing.T, files map[string]imageFile) {
	t.Helper()
	checkEntry(t, files, "etc/passwd", tar.TypeReg, 0o644, 0)
	checkEntry(t, files, "etc/group", tar.TypeReg, 0o644, 0)
	checkEntry(t, files, "etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0)
	checkEntry(t, files, "home/nonroot", tar.TypeDir, 0o700, 65532)
	checkEntry(t, files, "tmp", tar.TypeDir, 0o1777, 65532)
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("/etc/passwd has no nonroot user: %q", files["etc/passwd"].data)
	}
	if !strings.Contains(string(files["etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group: %q", files["etc/group"].data)
	}
	host, err := os.ReadFile(hostCABundle)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, host) {
		t.Error("the image's CA certificates are not the machine's")
	}
	if n := len(underDir(files, "tmp/")); n != 0 {
		t.Errorf("/tmp holds %d entries, want it empty", n)
	}
}

func checkEntry(t *testing.T, files map[string]imageFile, path string, typ byte, mode int64, owner int) {
	t.Helper()
	f, ok := files[path]
	if !ok {
		t.Errorf("/%s is missing; the image has %v", path, keys(files))
		return
	}
	h := f.hdr
	if h.Typeflag != typ || h.Mode&0o7777 != mode || h.Uid != owner || h.Gid != owner {
		t.Errorf("/%s: type %q mode %o owner %d:%d, want type %q mode %o owner %d:%d", path, h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid, typ, mode, owner, owner)
	}
	if !h.ModTime.Equal(commitTime(t)) {
		t.Errorf("/%s: mtime %v, want the commit's time %v", path, h.ModTime, commitTime(t))
	}
}

// checkStatic checks that data is an executable for plat that needs no
// dynamic loader (no PT_INTERP program header), as an image without a libc
// requires.
func checkStatic(t *testing.T, data []byte, plat v1.Platform) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("not an ELF file: %v", err)
		return
	}
	if f.Machine != elfMachine[plat.Architecture] {
		t.Errorf("ELF machine %v, want %v for %s", f.Machine, elfMachine[plat.Architecture], plat.Architecture)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (it has a PT_INTERP program header)")
		}
	}
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// extract reads an image's file system, all layers applied.
func extract(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = imageFile{h, data}
	}
}

func untar(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, 0o644)
			}
		default:
			// containerd's importer reads only files and directories.
			t.Fatalf("archive entry %s has type %q, want a file or directory", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func find(t *testing.T, images []built, name string) built {
	t.Helper()
	for _, b := range images {
		if b.Spec.Name == name {
			return b
		}
	}
	t.Fatalf("no image %s was built", name)
	return built{}
}

func underDir(files map[string]imageFile, prefix string) []string {
	var names []string
	for name := range files {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names
}

func keys(files map[string]imageFile) []string {
	var names []string
	for name := range files {
		names = append(names, "/"+name)
	}
	slices.Sort(names)
	return names
}

func writeExecutable(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "program")
	writeFile(t, p, data, 0o755)
	return p
}

func writeFile(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, program string, args ...string) string {
	t.Helper()
	out, err := exec.Command(program, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(program), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func repoRoot() string {
	root, err := filepath.Abs("../../..")
	if err != nil {
		panic(err)
	}
	return root
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func commitTime(t *testing.T) time.Time {
	t.Helper()
	secs, err := strconv.ParseInt(git(t, "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(secs, 0).UTC()
}

func pauseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("pause", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
