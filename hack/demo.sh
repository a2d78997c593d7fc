#!/usr/bin/env bash
# `make demo`: a local cluster, the Lifeboat server on filesystem storage, a
# sample workload, one backup, a look at what it wrote, a restore into a
# copy, and the backup's deletion (its plan first). Everything runs
# on this machine and stops when the demo ends. State is kept under
# .lifeboat/demo (removed at the start of each run).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state=.lifeboat/demo
rm -rf "$state"
mkdir -p "$state" bin
export KUBECONFIG="$root/$state/kubeconfig"
: "${KUBEBUILDER_ASSETS:=$(hack/cluster-bins.sh)}"
export KUBEBUILDER_ASSETS

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

step "Building"
go build -o bin/lifeboat-localcluster ./hack/localcluster
go build -o bin/lifeboat-demoapp ./hack/demoapp
# Always: go build is incremental, and a binary left from an older checkout
# would show old behaviour.
go build -o bin/lifeboat ./cmd/lifeboat

step "Starting a local Kubernetes API server (kube-apiserver + etcd)"
bin/lifeboat-localcluster --kubeconfig "$KUBECONFIG" >"$state/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
  grep -q '^ready' "$state/cluster.log" 2>/dev/null && break
  if ! kill -0 "${pids[0]}" 2>/dev/null; then cat "$state/cluster.log"; exit 1; fi
  sleep 0.5
done
grep -q '^ready' "$state/cluster.log" || { echo "the local cluster did not start:"; cat "$state/cluster.log"; exit 1; }
grep 'serving at' "$state/cluster.log"

# --no-server: the server runs below as a process (the local cluster has no nodes).
step "lifeboat install --use-filesystem $state/storage --no-server"
bin/lifeboat install --use-filesystem "$state/storage" --no-server

step "Starting the Lifeboat server (log: $state/server.log)"
bin/lifeboat server --metrics-address 0 --health-address 0 >"$state/server.log" 2>&1 &
pids+=($!)

step "Creating a sample workload in namespace demo-app"
bin/lifeboat-demoapp --kubeconfig "$KUBECONFIG" --namespace demo-app

name="demo-$(date +%Y%m%d-%H%M%S)"
step "lifeboat backup create $name --include-namespaces demo-app --wait"
bin/lifeboat backup create "$name" --include-namespaces demo-app --wait

step "lifeboat backup get"
bin/lifeboat backup get

step "lifeboat backup describe $name --details"
bin/lifeboat backup describe "$name" --details

step "Files in object storage ($state/storage/backups/backups/$name)"
ls -l "$state/storage/backups/backups/$name"

step "Inside $name.tar.gz (Velero's layout)"
tar -tzf "$state/storage/backups/backups/$name/$name.tar.gz" | sort

step "lifeboat backup logs $name"
bin/lifeboat backup logs "$name"

step "lifeboat restore create --from-backup $name --namespace-mappings demo-app:demo-app-copy --wait"
bin/lifeboat restore create "$name-copy" --from-backup "$name" --namespace-mappings demo-app:demo-app-copy --wait

step "lifeboat restore describe $name-copy --details"
bin/lifeboat restore describe "$name-copy" --details

step "lifeboat backup delete $name --dry-run (changes nothing)"
bin/lifeboat backup delete "$name" --dry-run

step "lifeboat backup delete $name --confirm --wait"
bin/lifeboat backup delete "$name" --confirm --wait

step "lifeboat delete-request get"
bin/lifeboat delete-request get

step "Files left in object storage for $name"
if [[ -e "$state/storage/backups/backups/$name" ]]; then
  ls -l "$state/storage/backups/backups/$name"
else
  echo "none: $state/storage/backups/backups/$name is gone"
fi

step "Done"
echo "The backup $name was restored into namespace demo-app-copy (which stays: restored objects are not the backup's) and then deleted with its restore record and files. The cluster and server stop now."
