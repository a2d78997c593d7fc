package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

type volumeSnapshotterServer struct {
	generated.UnimplementedVolumeSnapshotterServer
	m *mux
}

func (s *volumeSnapshotterServer) Init(_ context.Context, req *generated.VolumeSnapshotterInitRequest) (*generated.Empty, error) {
	return serve(s.m, req.GetPlugin(), "Init", func(impl api.VolumeSnapshotter) (*generated.Empty, error) {
		if err := impl.Init(req.GetConfig()); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

// CreateVolumeFromSnapshot: the wire has no "unset" for iops, so 0 stands
// for none, as in Velero.
func (s *volumeSnapshotterServer) CreateVolumeFromSnapshot(_ context.Context, req *generated.CreateVolumeRequest) (*generated.CreateVolumeResponse, error) {
	return serve(s.m, req.GetPlugin(), "CreateVolumeFromSnapshot", func(impl api.VolumeSnapshotter) (*generated.CreateVolumeResponse, error) {
		var iops *int64
		if v := req.GetIops(); v != 0 {
			iops = &v
		}
		id, err := impl.CreateVolumeFromSnapshot(req.GetSnapshotID(), req.GetVolumeType(), req.GetVolumeAZ(), iops)
		if err != nil {
			return nil, err
		}
		return &generated.CreateVolumeResponse{VolumeID: id}, nil
	})
}

func (s *volumeSnapshotterServer) GetVolumeInfo(_ context.Context, req *generated.GetVolumeInfoRequest) (*generated.GetVolumeInfoResponse, error) {
	return serve(s.m, req.GetPlugin(), "GetVolumeInfo", func(impl api.VolumeSnapshotter) (*generated.GetVolumeInfoResponse, error) {
		volumeType, iops, err := impl.GetVolumeInfo(req.GetVolumeID(), req.GetVolumeAZ())
		if err != nil {
			return nil, err
		}
		res := &generated.GetVolumeInfoResponse{VolumeType: volumeType}
		if iops != nil {
			res.Iops = *iops
		}
		return res, nil
	})
}

func (s *volumeSnapshotterServer) CreateSnapshot(_ context.Context, req *generated.CreateSnapshotRequest) (*generated.CreateSnapshotResponse, error) {
	return serve(s.m, req.GetPlugin(), "CreateSnapshot", func(impl api.VolumeSnapshotter) (*generated.CreateSnapshotResponse, error) {
		id, err := impl.CreateSnapshot(req.GetVolumeID(), req.GetVolumeAZ(), req.GetTags())
		if err != nil {
			return nil, err
		}
		return &generated.CreateSnapshotResponse{SnapshotID: id}, nil
	})
}

func (s *volumeSnapshotterServer) DeleteSnapshot(_ context.Context, req *generated.DeleteSnapshotRequest) (*generated.Empty, error) {
	return serve(s.m, req.GetPlugin(), "DeleteSnapshot", func(impl api.VolumeSnapshotter) (*generated.Empty, error) {
		if err := impl.DeleteSnapshot(req.GetSnapshotID()); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

func (s *volumeSnapshotterServer) GetVolumeID(_ context.Context, req *generated.GetVolumeIDRequest) (*generated.GetVolumeIDResponse, error) {
	return serve(s.m, req.GetPlugin(), "GetVolumeID", func(impl api.VolumeSnapshotter) (*generated.GetVolumeIDResponse, error) {
		pv, err := requestItem("persistent volume", req.GetPersistentVolume())
		if err != nil {
			return nil, err
		}
		id, err := impl.GetVolumeID(pv)
		if err != nil {
			return nil, err
		}
		return &generated.GetVolumeIDResponse{VolumeID: id}, nil
	})
}

func (s *volumeSnapshotterServer) SetVolumeID(_ context.Context, req *generated.SetVolumeIDRequest) (*generated.SetVolumeIDResponse, error) {
	return serve(s.m, req.GetPlugin(), "SetVolumeID", func(impl api.VolumeSnapshotter) (*generated.SetVolumeIDResponse, error) {
		pv, err := requestItem("persistent volume", req.GetPersistentVolume())
		if err != nil {
			return nil, err
		}
		updated, err := impl.SetVolumeID(pv, req.GetVolumeID())
		if err != nil {
			return nil, err
		}
		out, err := encodeItem("updated persistent volume", updated)
		if err != nil {
			return nil, err
		}
		return &generated.SetVolumeIDResponse{PersistentVolume: out}, nil
	})
}

// VolumeSnapshotterClient returns the VolumeSnapshotter called name, served
// by the process d was dispensed from (for api.KindVolumeSnapshotter). Each
// call is bounded by timeout; 0 means no bound.
func VolumeSnapshotterClient(d any, name string, timeout time.Duration) (api.VolumeSnapshotter, error) {
	conn, err := dispensed(d, api.KindVolumeSnapshotter, name)
	if err != nil {
		return nil, err
	}
	return &volumeSnapshotterClient{base{api.KindVolumeSnapshotter, name, timeout}, generated.NewVolumeSnapshotterClient(conn)}, nil
}

type volumeSnapshotterClient struct {
	base
	rpc generated.VolumeSnapshotterClient
}

func (c *volumeSnapshotterClient) Init(config map[string]string) error {
	ctx, cancel := c.context()
	defer cancel()
	_, err := c.rpc.Init(ctx, &generated.VolumeSnapshotterInitRequest{Plugin: c.name, Config: config})
	return c.fail("Init", err)
}

func (c *volumeSnapshotterClient) CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (string, error) {
	req := &generated.CreateVolumeRequest{Plugin: c.name, SnapshotID: snapshotID, VolumeType: volumeType, VolumeAZ: volumeAZ}
	if iops != nil {
		req.Iops = *iops
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.CreateVolumeFromSnapshot(ctx, req)
	if err != nil {
		return "", c.fail("CreateVolumeFromSnapshot", err)
	}
	return res.GetVolumeID(), nil
}

func (c *volumeSnapshotterClient) GetVolumeInfo(volumeID, volumeAZ string) (string, *int64, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.GetVolumeInfo(ctx, &generated.GetVolumeInfoRequest{Plugin: c.name, VolumeID: volumeID, VolumeAZ: volumeAZ})
	if err != nil {
		return "", nil, c.fail("GetVolumeInfo", err)
	}
	var iops *int64
	if v := res.GetIops(); v != 0 {
		iops = &v
	}
	return res.GetVolumeType(), iops, nil
}

func (c *volumeSnapshotterClient) CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (string, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.CreateSnapshot(ctx, &generated.CreateSnapshotRequest{Plugin: c.name, VolumeID: volumeID, VolumeAZ: volumeAZ, Tags: tags})
	if err != nil {
		return "", c.fail("CreateSnapshot", err)
	}
	return res.GetSnapshotID(), nil
}

func (c *volumeSnapshotterClient) DeleteSnapshot(snapshotID string) error {
	ctx, cancel := c.context()
	defer cancel()
	_, err := c.rpc.DeleteSnapshot(ctx, &generated.DeleteSnapshotRequest{Plugin: c.name, SnapshotID: snapshotID})
	return c.fail("DeleteSnapshot", err)
}

func (c *volumeSnapshotterClient) GetVolumeID(pv runtime.Unstructured) (string, error) {
	pvJSON, err := encodeItem("persistent volume", pv)
	if err != nil {
		return "", c.local("GetVolumeID", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.GetVolumeID(ctx, &generated.GetVolumeIDRequest{Plugin: c.name, PersistentVolume: pvJSON})
	if err != nil {
		return "", c.fail("GetVolumeID", err)
	}
	return res.GetVolumeID(), nil
}

func (c *volumeSnapshotterClient) SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
	pvJSON, err := encodeItem("persistent volume", pv)
	if err != nil {
		return nil, c.local("SetVolumeID", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.SetVolumeID(ctx, &generated.SetVolumeIDRequest{Plugin: c.name, PersistentVolume: pvJSON, VolumeID: volumeID})
	if err != nil {
		return nil, c.fail("SetVolumeID", err)
	}
	updated, err := decodeItem("updated persistent volume", res.GetPersistentVolume())
	if err != nil {
		return nil, c.local("SetVolumeID", err)
	}
	return updated, nil
}
