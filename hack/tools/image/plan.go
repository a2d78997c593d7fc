package main

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// The numeric users the images run as. 65532 is the "nonroot" user of
// distroless images (and of Velero's); 65535 is what Kubernetes' own pause
// image runs as.
const (
	nonRoot   = 65532
	pauseUser = 65535
)

// A program the builder compiles: a main package of one of two modules.
type program struct {
	Module  string // directory of its Go module, relative to the repository root
	Package string // import path
}

// Name is the file `go build -o DIR/` names it: the package's last element.
func (p program) Name() string { return path.Base(p.Package) }

// An entry is one file or directory of a layer. Exactly one of Program,
// HostFile and Data gives a file's content; a directory has none.
type entry struct {
	Path     string      // in the image, relative to /
	Mode     fs.FileMode // permission bits, fs.ModeDir, fs.ModeSticky
	UID, GID int
	Program  string `json:",omitempty"` // a compiled program, by Name
	HostFile string `json:",omitempty"` // a file of this machine
	Data     string `json:",omitempty"` // literal content
}

// imageSpec is one image, as plain data: what it holds and how it runs.
// Every platform's image is assembled from the same spec.
type imageSpec struct {
	Name        string // the last part of its repository: lifeboat, pause, ...
	Ref         string // repository:tag
	Description string
	Version     string // the org.opencontainers.image.version label
	Entrypoint  []string
	User        string
	Env         []string `json:",omitempty"`
	Layers      [][]entry
}

// planInput is what the plan depends on.
type planInput struct {
	Repo         string   // prefix of every repository, e.g. ghcr.io/lifeboat-io
	Version      string   // Lifeboat's version (git describe)
	PauseVersion string   // the pause program's own version (pause/VERSION)
	Plugins      []string // the example plugins' program names
	CABundle     string   // the machine's CA certificates, PEM
	Busybox      string   // a static busybox of this machine (Debian's busybox-static)
}

// Where the programs come from. The lifeboat binary, the example plugins
// and the demo writer are the main module's; pause and copy-plugins are
// image plumbing and live in this module, which keeps the main module free
// of packaging code.
const (
	mainModule  = "."
	imageModule = "hack/tools/image"
)

var (
	lifeboatProgram    = program{mainModule, "github.com/lifeboat-io/lifeboat/cmd/lifeboat"}
	writerProgram      = program{mainModule, "github.com/lifeboat-io/lifeboat/hack/demoapp/writer"}
	pauseProgram       = program{imageModule, "github.com/lifeboat-io/lifeboat/hack/tools/image/pause"}
	copyPluginsProgram = program{imageModule, "github.com/lifeboat-io/lifeboat/hack/tools/image/copyplugins"}
)

// examplePluginsPattern is where the plugins that get images are: every
// main package under it.
const examplePluginsPattern = "./examples/plugins/..."

func examplePluginProgram(name string) program {
	return program{mainModule, "github.com/lifeboat-io/lifeboat/examples/plugins/" + name}
}

// plan describes every image. It reads nothing: the caller lists the
// plugins and finds the versions.
func plan(in planInput) []imageSpec {
	repo := strings.TrimSuffix(in.Repo, "/")
	base := baseLayer(in.CABundle)
	images := []imageSpec{{
		Name:        "lifeboat",
		Description: "Lifeboat: Kubernetes backup, restore and deletion with Velero's API (server and CLI)",
		Version:     in.Version,
		Entrypoint:  []string{"/lifeboat"},
		User:        user(nonRoot),
		Env:         []string{"HOME=/home/nonroot"},
		Layers: [][]entry{base, {
			file("lifeboat", lifeboatProgram.Name()),
			// The server's --plugin-dir; plugin images' init containers
			// fill the volume mounted over it.
			dir("plugins", 0o755, nonRoot),
		}},
	}}
	for _, p := range in.Plugins {
		images = append(images, imageSpec{
			Name:        "lifeboat-plugin-" + p,
			Description: "Lifeboat's example plugin " + p + ": copies itself into /target when run as an init container",
			Version:     in.Version,
			Entrypoint:  []string{"/copy-plugins"},
			User:        user(nonRoot),
			Env:         []string{"HOME=/home/nonroot"},
			Layers: [][]entry{base, {
				file("copy-plugins", copyPluginsProgram.Name()),
				dir("plugins", 0o755, 0),
				file("plugins/"+p, p),
			}},
		})
	}
	images = append(images, imageSpec{
		Name:        "pause",
		Description: "The sandbox (pause) container of Lifeboat's test node: waits for a signal, reaps zombies",
		Version:     in.PauseVersion,
		Entrypoint:  []string{"/pause"},
		User:        user(pauseUser),
		Layers:      [][]entry{{file("pause", pauseProgram.Name())}},
	}, imageSpec{
		Name:        "lifeboat-demo-writer",
		Description: "The demo's stateful workload: appends numbered lines to /data/lines.txt and serves them on :8080",
		Version:     in.Version,
		Entrypoint:  []string{"/demo-writer"},
		User:        user(nonRoot),
		Env:         []string{"HOME=/home/nonroot"},
		Layers:      [][]entry{base, {file("demo-writer", writerProgram.Name())}},
	}, imageSpec{
		// Tests exec into pods to read and write volumes; nothing but a
		// shell does that as plainly. Not for production use.
		Name:        "lifeboat-test-shell",
		Description: "A static busybox shell for Lifeboat's tests on the real node: /bin/busybox sh",
		Version:     in.Version,
		Entrypoint:  []string{"/bin/busybox", "sh"},
		User:        user(nonRoot),
		Env:         []string{"HOME=/home/nonroot"},
		Layers: [][]entry{base, {
			dir("bin", 0o755, 0),
			{Path: "bin/busybox", Mode: 0o755, HostFile: in.Busybox},
		}},
	})
	for i := range images {
		images[i].Ref = repo + "/" + images[i].Name + ":" + images[i].Version
	}
	return images
}

// programsOf lists the programs an image needs, by name.
func programsOf(spec imageSpec) []string {
	var names []string
	for _, layer := range spec.Layers {
		for _, e := range layer {
			if e.Program != "" {
				names = append(names, e.Program)
			}
		}
	}
	return names
}

// baseLayer is the layer every image but pause starts with: the nonroot
// user (some programs look up their user's name and home), CA certificates
// for TLS to object stores, a home and a /tmp for a process that is not
// root. The same bytes in each image, so a node stores it once.
func baseLayer(caBundle string) []entry {
	return []entry{
		dir("etc", 0o755, 0),
		{Path: "etc/group", Mode: 0o644, Data: "root:x:0:\nnonroot:x:65532:\n"},
		{Path: "etc/passwd", Mode: 0o644, Data: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		{Path: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, HostFile: caBundle},
		dir("home", 0o755, 0),
		dir("home/nonroot", 0o700, nonRoot),
		dir("tmp", 0o777|fs.ModeSticky, nonRoot),
	}
}

func file(path, program string) entry {
	return entry{Path: path, Mode: 0o755, Program: program}
}

func dir(path string, perm fs.FileMode, owner int) entry {
	return entry{Path: path, Mode: fs.ModeDir | perm, UID: owner, GID: owner}
}

func user(id int) string { return fmt.Sprintf("%d:%d", id, id) }

// programIndex maps every program an image may hold by its name.
func programIndex(plugins []string) map[string]program {
	idx := map[string]program{}
	for _, p := range []program{lifeboatProgram, writerProgram, pauseProgram, copyPluginsProgram} {
		idx[p.Name()] = p
	}
	for _, name := range plugins {
		idx[name] = examplePluginProgram(name)
	}
	return idx
}
