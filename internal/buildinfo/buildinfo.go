// Package buildinfo holds the version stamped into the binary at build time.
package buildinfo

// Version is set by the Makefile with -ldflags -X; "dev" in plain `go build`s.
var Version = "dev"
