#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [BUILD_DIR] - build the libFuzzer targets with clang++
# (-fsanitize=fuzzer,address,undefined) and run each for SECONDS seconds (default 30) from its
# seed corpus in tests/fuzz/corpus/<target>/ (new inputs go to BUILD_DIR/corpus/<target>/, the
# checked-in corpus is never written).  A hang is an input slower than 10 s (-timeout=10); inputs
# are capped at 4 KiB.  Exit status: 0 when no target found a crash, hang or sanitizer report
# (the reproducer is then left in BUILD_DIR/artifacts-<target>/), 77 when clang++ or libFuzzer is missing.
#   TREESYNC_FUZZ_CXX  the compiler (default: clang++)
#   TREESYNC_FUZZ_ALL=1 also fuzz patterns with many stars (a known exponential-time bug)
set -uo pipefail

seconds=${1:-30}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${2:-${TMPDIR:-/tmp}/treesync-fuzz}
cxx=${TREESYNC_FUZZ_CXX:-clang++}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "treesync-skip: $cxx not found; fuzzing needs clang with libFuzzer" >&2
  exit 77
fi
mkdir -p "$build"
probe="$build/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$build/probe" 2>/dev/null; then
  echo "treesync-skip: $cxx cannot link -fsanitize=fuzzer (libFuzzer missing)" >&2
  exit 77
fi

status=0
for target in fuzz_glob fuzz_exclude_file fuzz_state; do
  echo "==== $target: build"
  extra=()
  [ "${TREESYNC_FUZZ_ALL:-0}" = 1 ] && extra+=(-DTREESYNC_FUZZ_ALL_PATTERNS)
  if ! "$cxx" -std=c++17 -g -O1 "${extra[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -Wall -Wextra -Wpedantic -Werror -I"$root/include" "$here/$target.cpp" -o "$build/$target.bin"; then
    echo "$target: build FAILED"
    status=1
    continue
  fi
  mkdir -p "$build/corpus/$target" "$build/artifacts-$target"
  echo "==== $target: run ${seconds}s"
  (cd "$build/artifacts-$target" && "$build/$target.bin" -max_total_time="$seconds" -timeout=10 -max_len=4096 \
      -print_final_stats=1 "$build/corpus/$target" "$here/corpus/$target") >"$build/$target.log" 2>&1
  rc=$?
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs|ERROR|SUMMARY" "$build/$target.log" | head -n 5
  if [ "$rc" != 0 ]; then
    echo "$target: FAILED (exit $rc); log: $build/$target.log; reproducer in $build/artifacts-$target/"
    tail -n 40 "$build/$target.log"
    status=1
  else
    echo "$target: ok"
  fi
done
exit "$status"
