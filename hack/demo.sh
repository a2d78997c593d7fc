#!/usr/bin/env bash
# `make demo`: Lifeboat on a real single-node cluster of this machine
# (internal/localnode). It installs the server in the cluster from the
# locally built images with two example plugins, runs a stateful app whose
# pod writes to a PersistentVolume, backs it up with a volume policy whose
# `custom` action a plugin claims, restores it into a copy whose pod comes
# up, and deletes the backup, its plan first, with the DeleteItemAction
# plugin removing what the backup made. Everything stops when the demo
# ends, success or failure; what stays on disk is under .lifeboat/demo
# (cleared at the start of each run).
#
# Needs root (the node runs the kubelet and containerd), the images of
# `make image IMAGE_PLATFORMS=local` in bin/images, bin/lifeboat, and the
# environment of the Makefile's demo target (KUBEBUILDER_ASSETS,
# LIFEBOAT_NODE_BINS): run it as `make demo`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state="$root/.lifeboat/demo"
storage="$state/storage"      # the backup store: install's --use-filesystem
volumes="$state/volumes"      # the app's and the copy's PersistentVolumes (hostPath)
images="$root/bin/images"
started=$SECONDS

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
note() { printf '   %s\n' "$@"; }
fail() {
  printf '\n\033[1;31mdemo failed: %s\033[0m\n' "$*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || fail "the demo runs a real node (kubelet, containerd) and needs root: sudo make demo"
: "${KUBEBUILDER_ASSETS:?run the demo with make demo (it sets KUBEBUILDER_ASSETS=\$(hack/cluster-bins.sh))}"
: "${LIFEBOAT_NODE_BINS:?run the demo with make demo (it sets LIFEBOAT_NODE_BINS=\$(hack/node-bins.sh))}"
export KUBEBUILDER_ASSETS LIFEBOAT_NODE_BINS
[[ -x bin/lifeboat ]] || fail "bin/lifeboat is missing: make build"

kubectl() { "$LIFEBOAT_NODE_BINS/kubectl" --request-timeout=60s "$@"; }
lifeboat() { bin/lifeboat "$@"; }

# image NAME prints the reference of bin/images/NAME.tar, from the
# annotation containerd names an imported image by.
image() {
  local ref
  [[ -f "$images/$1.tar" ]] || fail "$images/$1.tar is missing: make image IMAGE_PLATFORMS=local"
  ref=$(tar -xOf "$images/$1.tar" index.json |
    sed -n 's/.*"io\.containerd\.image\.name": *"\([^"]*\)".*/\1/p' | head -n 1)
  [[ -n $ref ]] || fail "$images/$1.tar names no image (no io.containerd.image.name in its index.json)"
  echo "$ref"
}

# until SECONDS WHAT CMD... runs CMD every second until it succeeds, or
# fails the demo after SECONDS saying what did not happen.
until_ok() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what did not happen within ${timeout}s"
    sleep 1
  done
}

# pod_running NS: the writer's pods in NS (one, or more while a restored
# ReplicaSet adopts its pod) all run.
pod_running() {
  local phases
  phases=$(kubectl -n "$1" get pods -l app=writer -o jsonpath='{.items[*].status.phase}')
  [[ $phases =~ ^Running( Running)*$ ]]
}
# lines_written NS N: the writer in NS has logged at least N lines.
lines_written() {
  local n
  n=$(kubectl -n "$1" logs deploy/writer | grep -c 'msg=wrote') || true
  ((${n:-0} >= $2))
}
count() { grep -c . || true; }

# Stopping: the server's log is saved first (the node removes everything it
# made, pods and their logs included), then the node stops. The node
# answers SIGTERM by tearing itself down; wait until it has.
node_pid=""
stop_node() {
  [[ -n $node_pid ]] || return 0
  if kill -0 "$node_pid" 2>/dev/null; then
    kubectl -n velero logs deploy/velero --all-containers >"$state/server.log" 2>&1 || true
    kill -TERM "$node_pid" 2>/dev/null || true
  fi
  wait "$node_pid" 2>/dev/null || true
  node_pid=""
}
on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $node_pid ]]; then
    echo "stopping the node (it removes every process, mount, bridge and iptables chain it made)..."
    stop_node
  fi
  if ((rc != 0)); then
    echo "logs: $state/node.log (the node; its components' logs are quoted there on a failed start), $state/server.log (the Lifeboat server)" >&2
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

lifeboat_image=$(image lifeboat)
plugins="$(image lifeboat-plugin-cleanup),$(image lifeboat-plugin-custom-volume)"
writer_image=$(image lifeboat-demo-writer)

rm -rf "$state"
mkdir -p "$state" "$volumes"
export KUBECONFIG="$state/kubeconfig"

step "Starting a real single-node cluster (log: .lifeboat/demo/node.log)"
note "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet and kube-proxy on this machine;" \
  "the archives of bin/images are imported into containerd (nothing can be pulled: pods use imagePullPolicy Never)."
if [[ -e /run/lifeboat-node/lock ]] && ! flock -n /run/lifeboat-node/lock true; then
  note "Another local node runs on this machine (one at a time); this start waits until it stops."
fi
go build -o bin/lifeboat-localcluster ./hack/localcluster
: >"$state/node.log" # before the loop below reads it: the background job opens it when it gets to run
bin/lifeboat-localcluster --node --images bin/images --kubeconfig "$KUBECONFIG" >>"$state/node.log" 2>&1 &
node_pid=$!
until grep -q '^ready$' "$state/node.log"; do
  if ! kill -0 "$node_pid" 2>/dev/null; then
    node_pid=""
    cat "$state/node.log" >&2
    fail "the node did not start (its log is above)"
  fi
  sleep 1
done
grep '^local node' "$state/node.log"
note "up in $((SECONDS - started))s; images imported:"
sed -n 's/^localnode: imported /     /p' "$state/node.log"
echo "\$ kubectl get nodes -o wide"
kubectl get nodes -o wide
[[ $(kubectl get nodes -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}') == True ]] ||
  fail "the node is not Ready"

step "lifeboat install: the server in the cluster, two plugins, backups in $storage"
note "--image $lifeboat_image --image-pull-policy Never: the image built by make image" \
  "--plugins: the cleanup example (a BackupItemAction that makes a Receipt per ConfigMap, and the DeleteItemAction" \
  "  that deletes it with the backup) and the custom-volume example (it claims volumes whose policy action is custom)" \
  "--use-filesystem: a hostPath on this node, owned by the server's uid 65532 (install does that when run as root)"
echo "\$ lifeboat install --image $lifeboat_image --image-pull-policy Never --plugins $plugins --use-filesystem $storage --wait"
lifeboat install --image "$lifeboat_image" --image-pull-policy Never --plugins "$plugins" \
  --use-filesystem "$storage" --wait
echo "\$ kubectl -n velero get deploy,pods"
kubectl -n velero get deploy,pods
[[ $(kubectl -n velero get pods -l deploy=velero -o jsonpath='{.items[*].status.phase}') == Running ]] ||
  fail "the server's pod is not Running"
echo "\$ lifeboat plugin get   (asks the running server)"
lifeboat plugin get
plugin_list=$(lifeboat plugin get)
for p in example.io/receipt example.io/cleanup example.io/custom-volume; do
  grep -q "$p" <<<"$plugin_list" || fail "the server did not load plugin $p"
done

step "What the cleanup plugin needs: the Receipt CRD, and delete on receipts for the server"
note "The server's RBAC grants no delete outside its namespace; a ClusterRole labelled" \
  "lifeboat.io/aggregate-to-server is added to its aggregated role (docs/install.md)."
kubectl apply -f examples/plugins/cleanup/receipt-crd.yaml
kubectl apply -f - <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: lifeboat-demo-receipts
  labels:
    lifeboat.io/aggregate-to-server: "true"
rules:
- apiGroups: [example.lifeboat.io]
  resources: [receipts]
  verbs: [delete]
EOF
kubectl wait --for condition=Established crd/receipts.example.lifeboat.io --timeout=60s

# pv NAME NAMESPACE: a static volume on this node, pre-bound to the claim
# "data" of NAMESPACE, in the class demo-manual. Reclaim policy Delete is
# what a provisioner gives the volumes it makes; the restore below relies
# on it (a volume without a snapshot and with policy Delete is made anew).
pv() {
  mkdir -p "$volumes/$1"
  chown 65532:65532 "$volumes/$1" # the writer runs as uid 65532; fsGroup does not apply to hostPath
  kubectl apply -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $1
  labels: {app.kubernetes.io/part-of: lifeboat-demo}
spec:
  storageClassName: demo-manual
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  claimRef: {namespace: $2, name: data}
  hostPath: {path: $volumes/$1, type: Directory}
EOF
}

step "A sample app in namespace demo-app: the demo writer on a PersistentVolume"
note "This cluster has no dynamic provisioner and no CSI driver: the storage class demo-manual provisions" \
  "nothing, and the demo creates the volume itself (hostPath $volumes/demo-app-data)."
kubectl apply -f - <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: demo-manual
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
EOF
pv demo-app-data demo-app
kubectl apply -f - <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: demo-app
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: demo-app}
spec:
  storageClassName: demo-manual
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: writer-settings, namespace: demo-app}
data: {every: 5s, file: /data/lines.txt}
---
apiVersion: v1
kind: Service
metadata: {name: writer, namespace: demo-app}
spec:
  selector: {app: writer}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: writer, namespace: demo-app}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: writer}}
  template:
    metadata: {labels: {app: writer}}
    spec:
      containers:
      - name: writer
        image: $writer_image
        imagePullPolicy: Never
        args: [-every=5s, -file=/data/lines.txt]
        ports: [{containerPort: 8080}]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes:
      - name: data
        persistentVolumeClaim: {claimName: data}
EOF
until_ok 120 "the writer's pod in demo-app running" pod_running demo-app
until_ok 60 "two lines written by the writer in demo-app" lines_written demo-app 2
echo "\$ kubectl -n demo-app get pvc,pods,svc"
kubectl -n demo-app get pvc,pods,svc
echo "\$ kubectl -n demo-app logs deploy/writer"
kubectl -n demo-app logs deploy/writer
note "$volumes/demo-app-data/lines.txt on this machine holds $(count <"$volumes/demo-app-data/lines.txt") lines so far."

step "A resource policy whose volume action is custom, and what a backup would do with it"
note "Velero's format; the custom action's parameters name the plugin that carries it out (handler), which the" \
  "custom-volume example claims by default (examples/plugins/custom-volume/README.md)."
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: demo-volume-policy, namespace: velero}
data:
  policy.yaml: |
    version: v1
    volumePolicies:
    - conditions:
        storageClass: [demo-manual]
      action:
        type: custom
        parameters: {handler: example.io/custom-volume, copyTo: demo-archive}
EOF
echo "\$ lifeboat policy explain --policy-configmap demo-volume-policy --include-namespaces demo-app"
explained=$(lifeboat policy explain --policy-configmap demo-volume-policy --include-namespaces demo-app)
echo "$explained"
grep -q '^pvc demo-app/data  *custom (copyTo=demo-archive,handler=example.io/custom-volume)  *rule 0' <<<"$explained" ||
  fail "policy explain does not give the demo volume the custom action of rule 0"

name="demo-$(date +%Y%m%d-%H%M%S)"
backup_dir="$storage/backups/backups/$name"
step "lifeboat backup create $name --include-namespaces demo-app --resource-policies-configmap demo-volume-policy --wait"
lifeboat backup create "$name" --include-namespaces demo-app --resource-policies-configmap demo-volume-policy --wait
[[ $(kubectl -n velero get backup "$name" -o jsonpath='{.status.phase}') == Completed ]] ||
  fail "backup $name did not complete"
warnings=$(kubectl -n velero get backup "$name" -o jsonpath='{.status.warnings}')
((${warnings:-0} == 0)) || fail "backup $name has $warnings warnings (lifeboat backup logs $name)"

step "lifeboat backup describe $name --details"
described=$(lifeboat backup describe "$name" --details)
echo "$described"
grep -q 'pvc demo-app/data (pv demo-app-data).*custom (copyTo=demo-archive,handler=example.io/custom-volume).*volume policy 0.*handled by plugin example.io/custom-volume' <<<"$described" ||
  fail "backup describe does not show the demo volume's custom action handled by example.io/custom-volume"

step "What the custom-volume plugin recorded on the stored claim (in $name.tar.gz)"
note "It copies no data (an example): it records what it did where a restore or a DeleteItemAction can find it," \
  "and marks the claim as claimed, which is what backup describe reads."
stored_claim=$(tar -xzOf "$backup_dir/$name.tar.gz" resources/persistentvolumeclaims/namespaces/demo-app/data.json)
for key in example.lifeboat.io/custom-volume volumes.lifeboat.io/claimed-by; do
  value=$(kubectl create --dry-run=client -f - -o "jsonpath={.metadata.annotations.${key//./\\.}}" <<<"$stored_claim")
  [[ -n $value ]] || fail "the stored claim has no annotation $key"
  echo "$key: $value"
done

step "The Receipts the cleanup plugin made during the backup (one per ConfigMap backed up)"
echo "\$ kubectl get receipts -A"
kubectl get receipts -A
receipts=$(kubectl get receipts -A -l "velero.io/backup-name=$name" --no-headers 2>/dev/null | count)
((receipts > 0)) || fail "the cleanup plugin made no Receipt"
note "$receipts receipts; they carry velero.io/exclude-from-backup, so no backup holds them."

copy_pv=demo-app-copy-data
step "The storage the platform provides for the copy: volume $copy_pv for claim demo-app-copy/data"
note "The restore will not reuse demo-app-data: the backup holds no snapshot of it and its reclaim policy is Delete," \
  "so, as Velero does, the PV is not restored and the copy's claim comes back without spec.volumeName to get a" \
  "volume of its own. A provisioner would make that volume when the claim appears; here the demo makes it first," \
  "pre-bound to the claim (hostPath $volumes/$copy_pv, empty)."
pv "$copy_pv" demo-app-copy
kubectl get pv

restore="$name-copy"
step "lifeboat restore create $restore --from-backup $name --namespace-mappings demo-app:demo-app-copy --wait"
lifeboat restore create "$restore" --from-backup "$name" --namespace-mappings demo-app:demo-app-copy --wait
[[ $(kubectl -n velero get restore "$restore" -o jsonpath='{.status.phase}') == Completed ]] ||
  fail "restore $restore did not complete"

step "lifeboat restore describe $restore --details"
lifeboat restore describe "$restore" --details
echo "\$ lifeboat restore logs $restore | grep -i volume"
lifeboat restore logs "$restore" | grep -i volume || fail "the restore's log says nothing about the volume"

step "The copy comes up: its claim binds to $copy_pv, its pod runs"
until_ok 60 "claim demo-app-copy/data bound to $copy_pv" \
  test "$(kubectl -n demo-app-copy get pvc data -o jsonpath='{.status.phase}/{.spec.volumeName}')" = "Bound/$copy_pv"
until_ok 120 "the writer's pod in demo-app-copy running" pod_running demo-app-copy
until_ok 60 "a line written by the writer in demo-app-copy" lines_written demo-app-copy 1
echo "\$ kubectl -n demo-app-copy get pvc,pods,svc"
kubectl -n demo-app-copy get pvc,pods,svc
echo "\$ kubectl -n demo-app-copy logs deploy/writer"
copy_log=$(kubectl -n demo-app-copy logs deploy/writer)
echo "$copy_log"
first=$(grep -m1 -o 'msg="[a-z ]*"' <<<"$copy_log" || true)
[[ $first == 'msg="starting a new file"' ]] ||
  fail "the copy's writer began with ${first:-nothing}, not \"starting a new file\"; this demo expects no data to come back (see below)"
note "The copy started a new file: its volume is the new, empty $copy_pv. The objects came back (Deployment, pods," \
  "claim, ConfigMap, Service) but the volume's data did not, because nothing in this demo copies it: the" \
  "custom action's plugin is an example that only records that it handled the volume. A plugin that really copies" \
  "the data would pair with a RestoreItemAction that fills the new volume; then the log would say" \
  "\"resuming after line N\". The original keeps writing:"
kubectl -n demo-app logs deploy/writer --tail=2

step "lifeboat backup delete $name --dry-run (changes nothing)"
lifeboat backup delete "$name" --dry-run | tee "$state/delete-plan.txt"
grep -q 'example.io/cleanup: [1-9][0-9]* item' "$state/delete-plan.txt" ||
  fail "the deletion plan does not call example.io/cleanup"
[[ $(kubectl get receipts -A --no-headers 2>/dev/null | count) -eq $receipts ]] || fail "the dry run changed the receipts"

step "lifeboat backup delete $name --confirm --wait"
lifeboat backup delete "$name" --confirm --wait

step "What the deletion removed"
echo "\$ lifeboat delete-request get"
lifeboat delete-request get
[[ $(kubectl -n velero get deletebackuprequests -l "velero.io/backup-name=$name" -o jsonpath='{.items[*].status.phase}') == Processed ]] ||
  fail "the deletion request is not Processed"
echo "\$ kubectl get receipts -A"
kubectl get receipts -A 2>&1
left=$(kubectl get receipts -A --no-headers 2>/dev/null | count)
((left == 0)) || fail "$left receipts are left after the deletion"
kubectl -n velero get backup "$name" >/dev/null 2>&1 && fail "the Backup object $name is still there"
kubectl -n velero get restore "$restore" >/dev/null 2>&1 && fail "the Restore object $restore is still there"
for dir in "$backup_dir" "$storage/backups/restores/$restore"; do
  [[ ! -e $dir ]] || fail "$dir is still there"
  note "${dir#"$root/"}: gone"
done
note "The Receipts are gone (example.io/cleanup), and so are the backup's files, its restore's files and both objects." \
  "The restored copy stays: what a restore made belongs to the cluster, not to the backup."
kubectl get ns demo-app-copy

step "Stopping the node"
node_root=$(sed -n 's/^localnode: starting a real node .* in \(\/.*\)$/\1/p' "$state/node.log")
[[ -n $node_root ]] || fail "node.log does not say where the node kept its files"
stop_node
note "It stopped its processes and pods and removed their mounts, the bridge lifeboat0, its iptables chains and $node_root."
[[ ! -e $node_root ]] || fail "$node_root is still there"
if pgrep -f "$node_root" >/dev/null; then fail "processes of the node are still running: $(pgrep -af "$node_root")"; fi
if grep -q "$node_root" /proc/mounts; then fail "mounts of the node are still there: $(grep "$node_root" /proc/mounts)"; fi
if ! flock -n /run/lifeboat-node/lock true 2>/dev/null; then
  note "checked: no process, mount or file of the node is left (another local node has started since, so the" \
    "machine-wide bridge and iptables checks are skipped)"
else
  if ip link show lifeboat0 >/dev/null 2>&1; then fail "bridge lifeboat0 is still there"; fi
  if iptables-save 2>/dev/null | grep -q '^:\(KUBE\|CNI\)-'; then fail "KUBE-/CNI- iptables chains are still there"; fi
  note "checked: no process, mount or file of the node, no bridge lifeboat0, no KUBE-/CNI- iptables chain is left."
fi
echo "What remains is on disk, in .lifeboat/demo only:"
(cd "$state" && find . -maxdepth 3 | sort | sed 's/^/   /')
note "storage/backups is the backup store (a bucket): empty now, the backup was deleted;" \
  "volumes/ holds the two volumes' files, node.log and server.log the logs."

step "Done in $((SECONDS - started))s"
echo "A real node ran the Lifeboat server with two plugins; the app's backup used a custom volume action a plugin"
echo "claimed, restored into demo-app-copy whose pod came up on a new volume, and was deleted with the Receipts"
echo "its plugin made. Nothing of the node is left running."
