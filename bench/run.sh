#!/usr/bin/env bash
# Runs the backup benchmark: builds the floor program and the orchestrator,
# makes sure bin/lifeboat is current, and prints a markdown table of
# Lifeboat's backup throughput and memory against the floor measured in the
# same run. See bench/README.md.
#
#   BENCH_N       comma-separated numbers of ConfigMaps (default 2000,10000,50000)
#   BENCH_RUNS    measured runs per N; the table shows medians (default 3)
#   BENCH_WARMUP  unmeasured runs of each side per N first (default 1)
#   BENCH_OUT     also write the report to this file
#   BENCH_JSON    also write the raw results as JSON to this file
#   LIFEBOAT_BIN  the lifeboat binary to measure (default: make build, bin/lifeboat)
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
"$GO" build -o "$tools/backupbench" ./bench/backupbench

args=(
	-n "${BENCH_N:-2000,10000,50000}"
	-runs "${BENCH_RUNS:-3}"
	-warmup "${BENCH_WARMUP:-1}"
	-lifeboat "$LIFEBOAT_BIN"
	-floor "$tools/floor"
)
if [[ -n "${BENCH_JSON:-}" ]]; then
	args+=(-json "$BENCH_JSON")
fi

# Progress goes to stderr; the report alone to stdout (and BENCH_OUT).
if [[ -n "${BENCH_OUT:-}" ]]; then
	"$tools/backupbench" "${args[@]}" "$@" | tee "$BENCH_OUT"
else
	"$tools/backupbench" "${args[@]}" "$@"
fi
