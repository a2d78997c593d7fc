package main

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations naming an image in an OCI layout's index.json. containerd's
// importer (ctr images import, 1.6 and later) takes the image's name from
// io.containerd.image.name, else from org.opencontainers.image.ref.name
// (which `ctr` keeps as it is only when it is a full reference, not just a
// tag); both are set, to the full reference.
const (
	annotationRefName         = "org.opencontainers.image.ref.name"
	annotationContainerdImage = "io.containerd.image.name"
)

// writeLayout writes idx as an OCI image layout in dir (replacing what was
// there), named ref.
func writeLayout(dir, ref string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName:         ref,
		annotationContainerdImage: ref,
	}))
	if err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return nil
}

// tarLayout archives the OCI layout in dir as file: the form
// `ctr images import` reads (oci-layout, index.json, blobs/). Entries are
// sorted and carry mtime and no owner names, so the archive is as
// reproducible as the image. The file is written under a temporary name
// and renamed, so an interrupted build leaves no half archive.
func tarLayout(dir, file string, mtime time.Time) (err error) {
	var paths []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	tw := tar.NewWriter(tmp)
	for _, p := range paths {
		if err := addToTar(tw, dir, p, mtime); err != nil {
			return fmt.Errorf("archiving %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp made it 0600
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

func addToTar(tw *tar.Writer, dir, p string, mtime time.Time) error {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
	switch {
	case info.IsDir():
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		return tw.WriteHeader(hdr)
	case info.Mode().IsRegular():
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
	default:
		return fmt.Errorf("not a regular file or directory")
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// importTar loads an image archive into the containerd at address, in the
// namespace the kubelet's CRI uses, for pods with imagePullPolicy: Never.
// All platforms are imported so the image keeps its whole index.
func importTar(ctx context.Context, ctr, address, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctr, "--address", address, "-n", "k8s.io", "images", "import", "--all-platforms", file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", cmd.String(), err, out)
	}
	return nil
}
