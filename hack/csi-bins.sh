#!/usr/bin/env bash
# Builds the CSI test stack's Kubernetes parts (internal/testutil/csistack)
# from the pinned tools modules hack/tools/external-snapshotter and
# hack/tools/external-provisioner: snapshot-controller, csi-snapshotter and
# csi-provisioner, plus the snapshot.storage.k8s.io and
# groupsnapshot.storage.k8s.io CRDs of the external-snapshotter client module
# at the same version (crd/; without the group ones the snapshot-controller
# waits 30 s for them at every start). Everything
# goes into a cache directory keyed by the versions, which is printed. A
# cache hit costs nothing; a cold build takes a few minutes on 2 cores.
# kube-controller-manager, which the stack also runs, is hack/node-bins.sh's.
set -euo pipefail

SNAPSHOTTER_VERSION=v8.7.0
PROVISIONER_VERSION=v6.4.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
dir="$cache/csi-snapshotter-$SNAPSHOTTER_VERSION-provisioner-$PROVISIONER_VERSION"
# name  module dir under hack/tools  package  version
components=(
  "snapshot-controller external-snapshotter github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller $SNAPSHOTTER_VERSION"
  "csi-snapshotter external-snapshotter github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter $SNAPSHOTTER_VERSION"
  "csi-provisioner external-provisioner github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner $PROVISIONER_VERSION"
)
crds=(
  snapshot.storage.k8s.io_volumesnapshotclasses snapshot.storage.k8s.io_volumesnapshotcontents
  snapshot.storage.k8s.io_volumesnapshots groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses
  groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents groupsnapshot.storage.k8s.io_volumegroupsnapshots
)

complete() {
  local c name
  for c in "${components[@]}"; do
    name=${c%% *}
    [[ -x "$dir/$name" ]] || return 1
  done
  for name in "${crds[@]}"; do
    [[ -f "$dir/crd/$name.yaml" ]] || return 1
  done
}
if complete; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
# One build at a time on the machine (two test packages may ask at once).
exec 9>"$dir/.lock"
flock 9
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One go build per tools module (the snapshotter's two binaries share one):
# their common packages compile once and the binaries link in parallel.
# Built into a temporary directory and renamed: an interrupted build never
# leaves a half-written binary that a later run takes for a cache hit.
declare -A pkgs=() versions=() names=()
for c in "${components[@]}"; do
  read -r name mod pkg version <<<"$c"
  [[ -x "$dir/$name" ]] && continue
  pkgs[$mod]+=" $pkg"
  names[$mod]+=" $name"
  versions[$mod]=$version
done
for mod in "${!pkgs[@]}"; do
  echo "building${names[$mod]} ${versions[$mod]} into $dir (once per machine)" >&2
  # shellcheck disable=SC2086 # word splitting of the package list is meant
  (cd "$root/hack/tools/$mod" && GOWORK=off go build -trimpath \
    -ldflags "-s -w -X main.version=${versions[$mod]}" -o "$tmp/" ${pkgs[$mod]})
  for name in ${names[$mod]}; do
    mv "$tmp/$name" "$dir/$name"
  done
done
if ! complete; then
  client=$(cd "$root/hack/tools/external-snapshotter" && GOWORK=off go mod download -json \
    "github.com/kubernetes-csi/external-snapshotter/client/v8" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$tmp/crd"
  for name in "${crds[@]}"; do
    cp "$client/config/crd/$name.yaml" "$tmp/crd/"
  done
  rm -rf "$dir/crd"
  mv "$tmp/crd" "$dir/crd"
fi
echo "$dir"
