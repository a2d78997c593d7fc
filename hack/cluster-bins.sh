#!/usr/bin/env bash
# Builds the local cluster's kube-apiserver and etcd from the pinned tool
# modules under hack/tools/ into a cache directory keyed by their versions,
# and prints that directory. A cache hit costs nothing; a cold build takes
# ~15 minutes on 2 cores, so the cache lives outside the repository and is
# shared by every clone on the machine.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
dir="$cache/cluster-kube-$KUBE_VERSION-etcd-$ETCD_VERSION"

if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
# Build into a temporary name and rename: an interrupted build never leaves a
# half-written binary that a later run takes for a cache hit.
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [[ ! -x "$dir/etcd" ]]; then
  echo "building etcd $ETCD_VERSION into $dir (once per machine)" >&2
  (cd "$root/hack/tools/etcd" && go build -trimpath -o "$tmp/etcd" .)
  mv "$tmp/etcd" "$dir/etcd"
fi
if [[ ! -x "$dir/kube-apiserver" ]]; then
  echo "building kube-apiserver $KUBE_VERSION into $dir (once per machine, ~15 minutes cold)" >&2
  minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
  major=${KUBE_VERSION#v}; major=${major%%.*}
  v=k8s.io/component-base/version
  (cd "$root/hack/tools/kubernetes" && go build -trimpath \
    -ldflags "-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
    -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$tmp/kube-apiserver" "$dir/kube-apiserver"
fi
echo "$dir"
