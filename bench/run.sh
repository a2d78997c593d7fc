#!/usr/bin/env bash
# Runs the backup and restore benchmarks: builds the two floor programs, the
# orchestrator and the example BackupItemAction, makes sure bin/lifeboat is
# current, and prints markdown tables of Lifeboat's backup and restore
# throughput and memory against floors measured in the same run, of a
# backup's verification with a restore dry run against reading its tarball
# plus the same dry-run creates (when BENCH_VERIFY_N is set), of what
# one external BackupItemAction on every item costs a backup, of backup
# deletion, of a backup and deletion of CSI snapshots against a plain
# program's (bench/csifloor), and of a file-system backup of a volume of
# mixed files against a plain program writing them compressed to the same
# S3 store (bench/fsfloor). See bench/README.md.
#
#   BENCH_N            backup: comma-separated numbers of ConfigMaps (default 2000,10000,50000)
#   BENCH_SKIP_BACKUP  1: no backup throughput measurement
#   BENCH_RESTORE_N    restore: comma-separated numbers of ConfigMaps (default 10000)
#   BENCH_SKIP_RESTORE 1: no restore measurement
#   BENCH_VERIFY_N     verify with a restore dry run: comma-separated numbers of ConfigMaps in the verified backup (default: none)
#   BENCH_SKIP_VERIFY  1: no verify measurement, whatever BENCH_VERIFY_N says
#   BENCH_PLUGIN_N     plugin overhead: comma-separated numbers of ConfigMaps (default 10000)
#   BENCH_SKIP_PLUGIN  1: no plugin overhead measurement
#   BENCH_DELETE_N     deletion: comma-separated numbers of ConfigMaps in the deleted backup (default 50000,100000)
#   BENCH_SKIP_DELETE  1: no deletion measurement
#   BENCH_CSI_N        CSI snapshots: comma-separated numbers of claims backed up with snapshots and deleted (default 100)
#   BENCH_SKIP_CSI     1: no CSI measurement
#   BENCH_FS_BYTES     file-system backup: the volume's size (default 1Gi; bytes or a quantity such as 512Mi)
#   BENCH_FS_SMALL_BYTES file-system backup: a second, smaller volume for the node agent's RSS (default 256Mi; 0: none)
#   BENCH_SKIP_FS      1: no file-system backup measurement
#   BENCH_SKIP_POLICY  1: no volume policy evaluation measurement (10,000 claims, 20,000 pods)
#   BENCH_RUNS         measured runs per N of every measurement; the tables show medians (default 3)
#   BENCH_WARMUP       unmeasured backup runs of each side per N first (default 1; plugin: per server process; CSI: backups and deletions)
#   BENCH_RESTORE_WARMUP unmeasured restore runs of each side per N first (default 0)
#   BENCH_OUT          also write the report to this file
#   BENCH_JSON         also write the raw results as JSON to this file
#   LIFEBOAT_BIN       the lifeboat binary to measure (default: make build, bin/lifeboat)
# Further arguments go to the orchestrator (go run ./bench/backupbench -h).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}

if [[ -z "${KUBEBUILDER_ASSETS:-}" ]]; then
	KUBEBUILDER_ASSETS=$(hack/cluster-bins.sh)
	export KUBEBUILDER_ASSETS
fi

if [[ -z "${LIFEBOAT_BIN:-}" ]]; then
	make -s build >&2
	LIFEBOAT_BIN=bin/lifeboat
fi

tools=$(mktemp -d "${TMPDIR:-/tmp}/lifeboat-bench-bin.XXXXXX")
trap 'rm -rf "$tools"' EXIT
"$GO" build -o "$tools/floor" ./bench/floor
"$GO" build -o "$tools/createfloor" ./bench/createfloor
"$GO" build -o "$tools/backupbench" ./bench/backupbench

restore_n=${BENCH_RESTORE_N:-10000}
if [[ "${BENCH_SKIP_RESTORE:-}" == 1 ]]; then
	restore_n=
fi
verify_n=${BENCH_VERIFY_N:-}
if [[ "${BENCH_SKIP_VERIFY:-}" == 1 ]]; then
	verify_n=
fi
plugin_n=${BENCH_PLUGIN_N:-10000}
if [[ "${BENCH_SKIP_PLUGIN:-}" == 1 ]]; then
	plugin_n=
fi
plugin_args=()
if [[ -n "$plugin_n" ]]; then
	# The plugin overhead measurement's BackupItemAction: it annotates the
	# stored copy of every ConfigMap (and Deployment), and reads its plugin
	# ConfigMap once per process, not per item.
	"$GO" build -o "$tools/annotate" ./examples/plugins/annotate
	plugin_args=(-plugin-n "$plugin_n" -plugin "$tools/annotate")
fi
delete_n=${BENCH_DELETE_N:-50000,100000}
if [[ "${BENCH_SKIP_DELETE:-}" == 1 ]]; then
	delete_n=
fi
delete_args=()
if [[ -n "$delete_n" ]]; then
	# The deletion measurement's external DeleteItemAction: it applies to
	# every ConfigMap and does nothing with it.
	"$GO" build -o "$tools/deleteplugin" ./bench/deleteplugin
	delete_args=(-delete-n "$delete_n" -delete-plugin "$tools/deleteplugin")
fi
csi_n=${BENCH_CSI_N:-100}
if [[ "${BENCH_SKIP_CSI:-}" == 1 ]]; then
	csi_n=
fi
csi_args=()
if [[ -n "$csi_n" ]]; then
	# The CSI stack's sidecars and kube-controller-manager (cached builds).
	if [[ -z "${LIFEBOAT_CSI_BINS:-}" ]]; then
		LIFEBOAT_CSI_BINS=$(hack/csi-bins.sh)
		export LIFEBOAT_CSI_BINS
	fi
	if [[ -z "${LIFEBOAT_NODE_BINS:-}" ]]; then
		LIFEBOAT_NODE_BINS=$(hack/node-bins.sh)
		export LIFEBOAT_NODE_BINS
	fi
	"$GO" build -o "$tools/csifloor" ./bench/csifloor
	csi_args=(-csi-n "$csi_n" -csifloor "$tools/csifloor")
fi
fs_args=()
if [[ "${BENCH_SKIP_FS:-}" != 1 ]]; then
	# versitygw, the S3 server (cached build).
	if [[ -z "${LIFEBOAT_VERSITYGW:-}" ]]; then
		LIFEBOAT_VERSITYGW=$(hack/versitygw.sh)
		export LIFEBOAT_VERSITYGW
	fi
	"$GO" build -o "$tools/fsfloor" ./bench/fsfloor
	fs_args=(-fs-bytes "${BENCH_FS_BYTES:-1Gi}" -fs-small-bytes "${BENCH_FS_SMALL_BYTES:-256Mi}" -fsfloor "$tools/fsfloor")
fi
args=(
	-n "${BENCH_N:-2000,10000,50000}"
	-restore-n "$restore_n"
	-verify-n "$verify_n"
	-runs "${BENCH_RUNS:-3}"
	-warmup "${BENCH_WARMUP:-1}"
	-restore-warmup "${BENCH_RESTORE_WARMUP:-0}"
	-lifeboat "$LIFEBOAT_BIN"
	-floor "$tools/floor"
	-createfloor "$tools/createfloor"
	"${plugin_args[@]}"
	"${delete_args[@]}"
	"${csi_args[@]}"
	"${fs_args[@]}"
)
if [[ "${BENCH_SKIP_BACKUP:-}" == 1 ]]; then
	args+=(-skip-backup)
fi
if [[ -n "${BENCH_JSON:-}" ]]; then
	args+=(-json "$BENCH_JSON")
fi

# Progress goes to stderr; the report alone to stdout (and BENCH_OUT).
if [[ -n "${BENCH_OUT:-}" ]]; then
	"$tools/backupbench" "${args[@]}" "$@" | tee "$BENCH_OUT"
else
	"$tools/backupbench" "${args[@]}" "$@"
fi

# Volume policy evaluation needs no cluster: it runs last, on its own.
if [[ "${BENCH_SKIP_POLICY:-}" != 1 ]]; then
	echo >&2 "volume policy evaluation: 10,000 claims, 20,000 pods"
	"$GO" build -o "$tools/policybench" ./bench/policybench
	if [[ -n "${BENCH_OUT:-}" ]]; then
		{ echo; echo "## Volume policy evaluation"; echo; "$tools/policybench" -runs "${BENCH_RUNS:-3}"; } | tee -a "$BENCH_OUT"
	else
		echo; echo "## Volume policy evaluation"; echo; "$tools/policybench" -runs "${BENCH_RUNS:-3}"
	fi
fi
