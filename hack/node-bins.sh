#!/usr/bin/env bash
# Builds the real local node's Kubernetes components (kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy, kubectl) from the
# pinned tools module hack/tools/kubernetes, at the same version and with the
# same flags as the kube-apiserver of hack/cluster-bins.sh (so the build cache
# is shared), into a cache directory keyed by that version, and prints the
# directory. A cache hit costs nothing; cold, after kube-apiserver, the builds
# take ~6 minutes on 2 cores (kubelet alone ~6 minutes with nothing cached).
# The API-server-only tests never need these: only tests and the demo that
# run pods do.
set -euo pipefail

KUBE_VERSION=v1.37.2
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
dir="$cache/node-kube-$KUBE_VERSION"
components=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)

missing=()
for c in "${components[@]}"; do
  [[ -x "$dir/$c" ]] || missing+=("$c")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
# One build at a time on the machine: two test packages asking at once would
# otherwise both build for minutes, and the machine has two cores.
exec 9>"$dir/.lock"
flock 9
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
major=${KUBE_VERSION#v}; major=${major%%.*}
v=k8s.io/component-base/version
# Another process may have built some while this one waited for the lock.
todo=()
for c in "${missing[@]}"; do
  [[ -x "$dir/$c" ]] || todo+=("$c")
done
if [[ ${#todo[@]} -gt 0 ]]; then
  echo "building ${todo[*]} $KUBE_VERSION into $dir (once per machine)" >&2
  # One go build for all of them: it compiles their shared packages once and
  # links the binaries in parallel (a link keeps one core busy for tens of
  # seconds; built one after another, the other core waited). Built into a
  # temporary directory and renamed: an interrupted build never leaves a
  # half-written binary that a later run takes for a cache hit.
  pkgs=()
  for c in "${todo[@]}"; do
    pkgs+=("k8s.io/kubernetes/cmd/$c")
  done
  (cd "$root/hack/tools/kubernetes" && GOWORK=off go build -trimpath \
    -ldflags "-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
    -o "$tmp/" "${pkgs[@]}")
  for c in "${todo[@]}"; do
    mv "$tmp/$c" "$dir/$c"
  done
fi
echo "$dir"
