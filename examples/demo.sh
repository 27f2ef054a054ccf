#!/usr/bin/env bash
# examples/demo.sh [SRC] — the main job: build the treesync CLI (Release) and mirror a real tree
# (default /usr/include) into a fresh temporary directory twice, as a user would (-a: links,
# modes, times, owner and group): a cold run that populates it,
# then a warm run that finds nothing to do. Prints the first actions and both summaries.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=${1:-/usr/include}
build="$root/build/demo"

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DTREESYNC_BUILD_TESTS=OFF -DTREESYNC_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" --target treesync_cli -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
cli="$build/examples/treesync"

dst=$(mktemp -d "${TMPDIR:-/tmp}/treesync-demo.XXXXXX")
trap 'rm -rf "$dst"' EXIT

echo "== cold run: $src -> $dst/mirror (first 10 actions)"
status=0
"$cli" -a -i --stats --delete "$src/" "$dst/mirror" > "$dst/cold.log" || status=$?
head -n 10 "$dst/cold.log"
echo "   ..."
sed -n '/^Entries scanned:/,$p' "$dst/cold.log"
echo
echo "== warm run: nothing changed, so nothing is written"
"$cli" -a -i --stats --delete "$src/" "$dst/mirror" || status=$?
echo
echo "== exit status: $status (23 = some entries could not be copied, e.g. dangling links; see stderr)"
