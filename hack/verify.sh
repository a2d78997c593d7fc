#!/usr/bin/env bash
# Fails when the committed tree is not what its sources produce:
#   1. `make generate` (deepcopy, CRDs, protobuf stubs) must change nothing;
#   2. `go mod tidy` must change nothing in any module of the repository;
#   3. no tracked file is over 1 MiB: generated data and binaries are made by
#      scripts, not committed (a session's submission has a size limit, and
#      one over it is refused whole).
#
# "Change nothing" is judged by comparing the whole work tree (tracked and
# untracked files, .gitignore honoured) before and after, not by
# `git diff --exit-code`: the same check then passes on a clean clone (CI)
# and on a developer's tree with uncommitted edits, and fails in both only
# when generation itself rewrites, adds or removes a file.
# Usage: hack/verify.sh (make verify)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# snapshot prints the id of a git tree holding the work tree as it is now. A
# private index (seeded from the real one, so unchanged files are not hashed
# again) leaves the developer's staging area alone.
tmpindex=$(mktemp)
trap 'rm -f "$tmpindex"' EXIT
snapshot() {
  cp "$(git rev-parse --git-path index)" "$tmpindex" 2>/dev/null || rm -f "$tmpindex"
  GIT_INDEX_FILE=$tmpindex git add -A . >/dev/null
  GIT_INDEX_FILE=$tmpindex git write-tree
}

status=0
before=$(snapshot)
make --no-print-directory generate
after=$(snapshot)
if [[ $before != "$after" ]]; then
  echo "verify: make generate changed the tree; the generated code or CRDs are stale. Run make generate and commit:" >&2
  git diff --stat "$before" "$after" >&2
  status=1
fi

# Every module: the main one, the pinned tools and the image builder under
# hack/tools, the Velero-SDK plugin under test/compat and the Helm chart
# test under test/helm. GOWORK=off: each is tidied as its own
# module, the way it is built.
mapfile -t mods < <(git ls-files --cached --others --exclude-standard -- 'go.mod' '**/go.mod' | LC_ALL=C sort)
for m in "${mods[@]}"; do
  dir=$(dirname "$m")
  if ! out=$(cd "$dir" && GOWORK=off go mod tidy -diff 2>&1); then
    echo "verify: go.mod or go.sum in $dir is not tidy; run (cd $dir && go mod tidy) and commit:" >&2
    echo "$out" >&2
    status=1
  fi
done
limit=$((1024 * 1024))
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  size=$(stat -c %s "$f")
  if ((size > limit)); then
    echo "verify: $f is $size bytes, over the 1 MiB limit for a committed file; have a script make it instead" >&2
    status=1
  fi
done < <(git ls-files -z)

[[ $status -eq 0 ]] && echo "verify: generated code, CRDs and ${#mods[@]} modules are up to date"
exit "$status"
