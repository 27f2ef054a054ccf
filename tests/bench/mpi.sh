#!/usr/bin/env bash
# tests/bench/mpi.sh - the MPI scenario of the benchmark: examples/treesync_mpi with 1, 2, 4, 8
# ranks (and the serial CLI for reference) mirroring a generated tree on slowfs, the harness's
# high-latency FUSE filesystem (tests/bench/slowfs.c: every request waits --delay-us), cold
# (empty destination) and no-op (unchanged tree).
#
#   sudo tests/bench/mpi.sh [options]
#
#   --ranks LIST      rank counts (default 1,2,4,8; Open MPI runs with --oversubscribe)
#   --jobs LIST       threads per rank, treesync_mpi -j (default 1,4)
#   --runs N          timed runs per figure (default 2; the median is reported)
#   --dirs N          directories of the generated tree (default 200, in 3 levels)
#   --files N         files per directory (default 10)
#   --delay-us N      slowfs latency per request (default 50, as run.sh)
#   --out DIR         results (default build/bench-results/mpi): runs.csv, results.md
#   --keep            keep the work directory
#
# Needs root (FUSE mount), MPI (libopenmpi-dev openmpi-bin, or MPICH), cmake, g++, and libfuse3-dev
# unless build/bench/bin/slowfs exists (run.sh builds it). The times are the programs' own
# elapsed_seconds (--json: from MPI_Init to the report, so without the launcher's start-up) and
# the wall time of the whole mpirun. Every cold run's destination is compared with the source.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ranks=1,2,4,8
jobs_list=1,4
runs=2
dirs=200
files=10
delay_us=50
out="$root/build/bench-results/mpi"
keep=0
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --ranks) ranks=$2; shift ;;
    --jobs) jobs_list=$2; shift ;;
    --runs) runs=$2; shift ;;
    --dirs) dirs=$2; shift ;;
    --files) files=$2; shift ;;
    --delay-us) delay_us=$2; shift ;;
    --out) out=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage 0 ;;
    *) echo "mpi.sh: unknown option $1" >&2; usage 1 ;;
  esac
  shift
done
say() { printf '==== %s\n' "$*" >&2; }

# ---- build -------------------------------------------------------------------------------------------
build="$root/build/bench-mpi"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTREESYNC_BUILD_TESTS=OFF -DTREESYNC_BUILD_EXAMPLES=ON \
      >/dev/null
cmake --build "$build" --target treesync_mpi -j"$(nproc)" >/dev/null
mpi_bin="$build/examples/treesync_mpi"
cli_bin="$build/examples/treesync"  # the serial reference; optional
cmake --build "$build" --target treesync_cli -j"$(nproc)" >/dev/null 2>&1 || {
  say "the CLI does not build: no serial reference rows"
  cli_bin=
}
slowfs="$root/build/bench/bin/slowfs"
if [ ! -x "$slowfs" ]; then
  slowfs="$build/slowfs"
  cc -std=c11 -O2 "$here/slowfs.c" -o "$slowfs" $(pkg-config --cflags --libs fuse3)
fi
mpirun=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpirun+=(--oversubscribe --bind-to none)
  [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
fi

# ---- the tree, the mount -------------------------------------------------------------------------------
work=$(mktemp -d /var/tmp/treesync-mpi-bench.XXXXXX)
mkdir -p "$work/backing" "$work/mnt" "$out"
cleanup() {
  mountpoint -q "$work/mnt" && { fusermount3 -u "$work/mnt" || umount -l "$work/mnt"; }
  [ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
python3 - "$work/backing/src" "$dirs" "$files" <<'EOF'
import os, sys
root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
old = 1_577_836_800_000_000_000
for i in range(dirs):
    d = os.path.join(root, f"a{i % 8}", f"b{i % 40}", f"c{i}")
    os.makedirs(d, exist_ok=True)
    for j in range(files):
        p = os.path.join(d, f"f{j}")
        with open(p, "wb") as f:
            f.write(os.urandom(256 + 97 * ((i * files + j) % 40)))
        os.utime(p, ns=(old, old))
EOF
entries=$(find "$work/backing/src" | wc -l)
bytes=$(du -sb "$work/backing/src" | cut -f1)
"$slowfs" "$work/backing" "$work/mnt" -o delay_us="$delay_us" -o max_threads=64,max_idle_threads=64,clone_fd
say "slowfs at $work/mnt, ${delay_us} us per request; tree: $entries entries, $bytes bytes"

# ---- runs ----------------------------------------------------------------------------------------------------
csv="$out/runs.csv"
echo "program,ranks,jobs,scenario,run,elapsed_s,wall_s,created,scanned,subtrees_per_rank" >"$csv"
measure() {  # program ranks jobs scenario run command...
  local program=$1 np=$2 j=$3 scenario=$4 run=$5
  shift 5
  local t0 t1 json
  t0=$(date +%s.%N)
  json=$("$@" 2>>"$out/stderr.log" | tail -1)
  t1=$(date +%s.%N)
  python3 - "$program" "$np" "$j" "$scenario" "$run" "$t0" "$t1" "$json" >>"$csv" <<'EOF'
import json, sys
program, np, j, scenario, run, t0, t1, text = sys.argv[1:]
r = json.loads(text)
assert r["exit_code"] == 0, r
per = "/".join(str(p["subtrees"]) for p in r.get("per_rank", []))
print(f"{program},{np},{j},{scenario},{run},{r['elapsed_seconds']:.3f},{float(t1) - float(t0):.3f},"
      f"{r['counts']['created']},{r['counts']['scanned']},{per}")
EOF
}
verify() {
  if ! diff -r "$work/backing/src" "$work/backing/dst" >/dev/null; then
    echo "mpi.sh: the destination differs from the source after $*" >&2
    exit 1
  fi
}
IFS=, read -ra rank_list <<<"$ranks"
IFS=, read -ra job_list <<<"$jobs_list"
for j in "${job_list[@]}"; do
  for run in $(seq 1 "$runs"); do
    if [ -n "$cli_bin" ]; then
      rm -rf "$work/backing/dst"
      measure cli 1 "$j" cold "$run" "$cli_bin" --json -L --delete -j"$j" "$work/mnt/src/" "$work/mnt/dst"
      verify "treesync -j$j"
      measure cli 1 "$j" noop "$run" "$cli_bin" --json -L --delete -j"$j" "$work/mnt/src/" "$work/mnt/dst"
    fi
    for np in "${rank_list[@]}"; do
      rm -rf "$work/backing/dst"
      measure mpi "$np" "$j" cold "$run" "${mpirun[@]}" -np "$np" "$mpi_bin" --json -L --delete -j"$j" "$work/mnt/src/" "$work/mnt/dst"
      verify "treesync_mpi -np $np -j$j"
      measure mpi "$np" "$j" noop "$run" "${mpirun[@]}" -np "$np" "$mpi_bin" --json -L --delete -j"$j" "$work/mnt/src/" "$work/mnt/dst"
    done
    say "jobs $j, run $run done"
  done
done

# ---- report ------------------------------------------------------------------------------------------------
python3 - "$csv" "$entries" "$bytes" "$delay_us" "$(nproc)" >"$out/results.md" <<'EOF'
import csv, statistics, sys
path, entries, size, delay, cpus = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
groups = {}
for r in rows:
    groups.setdefault((r["program"], int(r["ranks"]), int(r["jobs"]), r["scenario"]), []).append(r)
print(f"treesync_mpi on slowfs ({delay} us per request), {entries} entries, {int(size) / 1e6:.1f} MB, "
      f"one host with {cpus} CPUs; median of {len(next(iter(groups.values())))} runs; elapsed = the program's "
      "own time (no launcher start-up), wall = the whole mpirun\n")
print("| program | ranks | -j per rank | cold elapsed s | cold speed-up | no-op elapsed s | no-op speed-up | cold wall s | subtrees per rank (cold) |")
print("|---|---|---|---|---|---|---|---|---|")
for (program, np, j, scenario) in sorted(k for k in groups if k[3] == "cold"):
    cold = groups[(program, np, j, "cold")]
    noop = groups[(program, np, j, "noop")]
    c = statistics.median(float(r["elapsed_s"]) for r in cold)
    n = statistics.median(float(r["elapsed_s"]) for r in noop)
    w = statistics.median(float(r["wall_s"]) for r in cold)
    base_c = statistics.median(float(r["elapsed_s"]) for r in groups[("mpi", 1, j, "cold")]) if ("mpi", 1, j, "cold") in groups else c
    base_n = statistics.median(float(r["elapsed_s"]) for r in groups[("mpi", 1, j, "noop")]) if ("mpi", 1, j, "noop") in groups else n
    name = "treesync (CLI)" if program == "cli" else "treesync_mpi"
    print(f"| {name} | {np} | {j} | {c:.2f} | {base_c / c:.2f}x | {n:.2f} | {base_n / n:.2f}x | {w:.2f} | "
          f"{cold[0]['subtrees_per_rank'] or '-'} |")
EOF
cat "$out/results.md"
