package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Node service bind-mounts a volume's data directory: stage mounts it
// at the kubelet's per-volume staging path, publish mounts the staging path
// at each pod's target path. The driver runs in the host's mount namespace,
// so its mounts are the kubelet's and reach the pods' containers.

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	staging := req.GetStagingTargetPath()
	if req.GetVolumeId() == "" || staging == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and staging_target_path are required")
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var m volumeMeta
	if ok, err := d.readVolume(req.GetVolumeId(), &m); err != nil {
		return nil, err
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	if err := bindMount(filepath.Join(d.state.dir(volumesDir, req.GetVolumeId()), dataDir), staging, false); err != nil {
		return nil, status.Errorf(codes.Internal, "staging volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and staging_target_path are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(req.GetStagingTargetPath(), false); err != nil {
		return nil, status.Errorf(codes.Internal, "unstaging volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if req.GetVolumeId() == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.FailedPrecondition, "staging_target_path is required: the driver has STAGE_UNSTAGE_VOLUME")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if mounted, err := isMountPoint(req.GetStagingTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if !mounted {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", req.GetVolumeId(), req.GetStagingTargetPath())
	}
	if err := bindMount(req.GetStagingTargetPath(), target, req.GetReadonly()); err != nil {
		return nil, status.Errorf(codes.Internal, "publishing volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(req.GetTargetPath(), true); err != nil {
		return nil, status.Errorf(codes.Internal, "unpublishing volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// bindMount mounts src at dst (created if missing) unless something is
// mounted there already: the kubelet repeats calls, and a repeat must
// succeed without stacking a second mount.
func bindMount(src, dst string, readOnly bool) error {
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dst); err != nil || mounted {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s at %s: %w", src, dst, err)
	}
	if readOnly {
		// A bind mount ignores MS_RDONLY on the first call.
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(dst, 0)
			return fmt.Errorf("making %s read-only: %w", dst, err)
		}
	}
	return nil
}

// unmount unmounts path if it is a mount point, and removes the directory
// when remove is set; a path already gone is done.
func unmount(path string, remove bool) error {
	mounted, err := isMountPoint(path)
	if err != nil {
		return err
	}
	if mounted {
		if err := unix.Unmount(path, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
	}
	if remove {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// isMountPoint says whether path is the mount point of a mount in this
// mount namespace (a bind mount of a directory of the same file system has
// no device change to detect it by, so the mount table is read).
func isMountPoint(path string) (bool, error) {
	path = filepath.Clean(path)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountPath undoes the kernel's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
