#!/usr/bin/env bash
# Builds what the compatibility tests run from Velero's own module and
# prints the binary's path:
#   test/compat/build.sh          the compatibility plugin (a plugin binary
#                                 made with Velero's own SDK, see main.go);
#   test/compat/build.sh velero   Velero's own CLI, cmd/velero at the
#                                 version go.mod pins (a `tool` of this module);
#   test/compat/build.sh velerokopia
#                                 velerokopia/: a directory backed up and
#                                 restored with Velero's own file-system
#                                 backup code (its unified repository and
#                                 kopia uploader providers).
# Each binary is cached in a directory keyed by what it is built from, the
# way hack/gotool.sh caches pinned tools: the plugin by this module's go.mod,
# go.sum and sources, the CLI by go.mod and go.sum only (it has no sources
# here). A change to any of them rebuilds it, anything else reuses it. The
# first build downloads Velero's dependency graph (minutes); later ones take
# seconds or nothing.
# Usage: test/compat/build.sh [velero|velerokopia]
set -euo pipefail
mod=$(cd "$(dirname "$0")" && pwd)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
case "${1:-plugin}" in
plugin)
  key=$(cd "$mod" && cat go.mod go.sum $(ls *.go | sort) | sha256sum | cut -c1-16)
  bin="$cache/compat-plugin-$key/velero-sdk-plugin"
  what="the Velero-SDK compatibility plugin"
  pkg=.
  ldflags=
  ;;
velero)
  key=$(cd "$mod" && cat go.mod go.sum | sha256sum | cut -c1-16)
  bin="$cache/velero-cli-$key/velero"
  what="Velero's CLI"
  pkg=github.com/vmware-tanzu/velero/cmd/velero
  # The version Velero's release build stamps in (its hack/build.sh), read
  # from go.mod so the two never disagree: `velero version` prints it, and
  # compares its major.minor with the server's.
  version=$(cd "$mod" && GOWORK=off go list -m -f '{{.Version}}' github.com/vmware-tanzu/velero)
  ldflags="-X github.com/vmware-tanzu/velero/pkg/buildinfo.Version=$version -X github.com/vmware-tanzu/velero/pkg/buildinfo.GitTreeState=clean"
  ;;
velerokopia)
  key=$(cd "$mod" && cat go.mod go.sum velerokopia/*.go | sha256sum | cut -c1-16)
  bin="$cache/velerokopia-$key/velerokopia"
  what="velerokopia (Velero's file-system backup code)"
  pkg=./velerokopia
  ldflags=
  ;;
*)
  echo "usage: $0 [velero|velerokopia]" >&2
  exit 2
  ;;
esac
if [[ ! -x "$bin" ]]; then
  mkdir -p "$(dirname "$bin")"
  echo "building $what (once per change)" >&2
  # GOWORK=off: this is its own module; never build it against Lifeboat's.
  (cd "$mod" && GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$bin.tmp.$$" "$pkg")
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
