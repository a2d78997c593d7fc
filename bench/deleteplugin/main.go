// Command deleteplugin is the deletion benchmark's external
// DeleteItemAction: it applies to every ConfigMap and does nothing with
// it, so the benchmark measures what Lifeboat's deletion costs around a
// plugin (reading the tarball, matching, the gRPC calls, checkpoints), not
// what a plugin does. The server's report counts the items it was given.
package main

import (
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only when profileAddrEnv is set
	"os"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name.
const Name = "bench.lifeboat.io/noop-delete"

// profileAddrEnv, when set (the server's environment passes to its
// plugins), is where the plugin serves net/http/pprof, so that a
// benchmark run can profile the plugin's side of the calls.
const profileAddrEnv = "LIFEBOAT_BENCH_PLUGIN_PPROF"

func main() {
	if addr := os.Getenv(profileAddrEnv); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
	framework.NewServer().
		RegisterDeleteItemAction(Name, func(*slog.Logger) (api.DeleteItemAction, error) { return noop{}, nil }).
		Serve()
}

type noop struct{}

func (noop) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (noop) Execute(in *api.DeleteItemActionExecuteInput) error {
	if in.Item == nil {
		return nil
	}
	// Read what a real action reads first: which item this is.
	_ = in.Item.UnstructuredContent()["metadata"]
	return nil
}
