// Command filesnapshotter is an example VolumeSnapshotter plugin for tests:
// a VolumeSnapshotLocation with provider example.io/filesnapshotter "takes"
// a snapshot by writing a small JSON file into a directory (config key
// "dir"), and "deletes" it by removing the file, so a test can watch
// snapshots being created and deleted. It copies no data. See README.md.
package main

import (
	"log/slog"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name, and the provider a VolumeSnapshotLocation
// gives to use it.
const Name = "example.io/filesnapshotter"

func main() {
	newServer().Serve()
}

// newServer registers the plugin; the tests serve the same Server (with
// pkg/plugin/plugintest).
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterVolumeSnapshotter(Name, func(log *slog.Logger) (api.VolumeSnapshotter, error) {
			return &fileSnapshotter{log: log}, nil
		})
}
