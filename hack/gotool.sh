#!/usr/bin/env bash
# Builds a pinned Go tool from its module under hack/tools/<name> into a cache
# directory keyed by that module's go.sum (so a version bump rebuilds it) and
# prints the binary's path. Usage: hack/gotool.sh <name> <package>
set -euo pipefail
name=$1 pkg=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/tools/$name"
key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
bin="$cache/$name-$key/$name"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$(dirname "$bin")"
  # One build at a time per tool: a second caller (make -j, a test beside
  # a lint) waits for the first and then finds the binary.
  exec 9>"$(dirname "$bin")/.lock"
  flock 9
  if [[ ! -x "$bin" ]]; then
    echo "building $name (once per machine)" >&2
    (cd "$mod" && go build -trimpath -o "$bin.tmp.$$" "$pkg")
    mv "$bin.tmp.$$" "$bin"
  fi
  exec 9>&-
fi
echo "$bin"
