// Command dirstore is an example ObjectStore plugin: a BackupStorageLocation
// with provider example.io/dirstore keeps its backups in a local directory
// (config key "root"; the location's bucket is a subdirectory of it).
// See README.md.
package main

import (
	"log/slog"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name, and the provider a BackupStorageLocation gives
// to use it.
const Name = "example.io/dirstore"

func main() {
	newServer().Serve()
}

// newServer registers the plugin; the tests serve the same Server (with
// pkg/plugin/plugintest).
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterObjectStore(Name, func(*slog.Logger) (api.ObjectStore, error) {
			return &dirStore{}, nil
		})
}
