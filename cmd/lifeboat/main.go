// Command lifeboat is the Lifeboat server and its command-line client.
package main

import (
	"os"

	"github.com/lifeboat-io/lifeboat/internal/cli"
)

func main() {
	if err := cli.Execute(); err != nil {
		os.Exit(1)
	}
}
