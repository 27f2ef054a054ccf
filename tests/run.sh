#!/usr/bin/env bash
# tests/run.sh — build and test treesync in every configuration CI checks (run from anywhere).
#
#   gcc         g++:     doctest suite C++17 + C++20, compile-fail, examples, consumers, Meson build, MPI,
#                        sshfs suite
#   clang       clang++: doctest suite C++17, compile-fail, examples
#   clang-asan  clang++ C++20 with TREESYNC_SANITIZE=ON (ASan + UBSan): suite, compile-fail, examples,
#                        sshfs suite
#   release     g++ Release without -Werror (what a user builds): suite C++17, examples
# (every compiler x standard pair once, to keep CI within its time on 2 cores; the others are Debug
# with -Werror, TREESYNC_WERROR=ON)
# Work not repeated (issue 44): the differential test against rsync runs all of its cases in
# clang-asan and each case once more in one plain configuration (gcc, clang and release each run
# one third: -DTREESYNC_TEST_DIFF_SHARD=K/3, examples/rsync_diff_test.py --shard); Meson's build
# (ctest treesync.meson, tests/run_meson.cmake) leaves out its suite `long` (the doctest suite, the
# differential and MPI tests), which the gcc configuration builds and runs through CMake.
#
# tests/run.sh --quick   the check before a commit (CI runs the full tests/run.sh): one configuration,
#   `quick` in build/quick: g++ Debug, -Werror, C++17 only; the doctest suite, the CLI suite
#   (treesync.example.cli.*), the differential test against rsync with TREESYNC_DIFF_CASES (default
#   300) cases as root and as uid 65534, the Python tests (treesync.python*) and the small example
#   tests; no consumers, Meson, MPI, sshfs, compile-fail (ctest -LE compile_fail) or stress tests
#   (-LE stress: the SIGKILL crash test). It ignores TREESYNC_CONFIGS.
#
# Each configuration is configured, built and tested (ctest) in build/<name> with Ninja. The run
# stops at the first configuration that fails. The last line sums all configurations in ctest's
# own format ("100% tests passed, 0 tests failed out of N"); the exit status is 0 only if all passed.
#
# Environment:
#   TREESYNC_CONFIGS  configurations to run, in order (default: "gcc clang clang-asan release")
#   TREESYNC_JOBS     build and ctest parallelism (default: 2)
#   TREESYNC_CLEAN=1  delete each build directory first
#   TREESYNC_REPEAT=N same as --repeat N
#   TREESYNC_CCACHE=0 do not compile through ccache (used by default where it is installed; see
#                     "ccache" below)
#   TREESYNC_DIFF_CASES=N  at most N cases in each differential test (examples/rsync_diff_test.py);
#                     --quick sets 300 unless given
#
# tests/run.sh --repeat N   the flake check (issue 16): build each configuration as usual, then run
#   only the tests labelled `timing` (threads racing over one tree, signals, a pty: the tests whose
#   outcome could depend on scheduling), each up to N times until it fails (ctest --repeat
#   until-fail:N, CMake >= 3.17); ctest's summary counts a test as failed if any of its runs failed.
#   TREESYNC_REPEAT_LABEL picks another label (a ctest -L regex), e.g. `stress` for the SIGKILL crash
#   test and the MPI tests (about 15 s a run: use a small N).
#
# Missing tools (doctest, meson, ninja, clang, pkg-config, and Open MPI for the MPI tests) are
# installed with apt-get when running as root; otherwise the script says what to install. So are
# the sshfs suite's (sshfs, fuse3, openssh-server, openssh-client: tests/sshfs/); without them, or
# without /dev/fuse, its tests are reported as skipped, and the summary says why.

set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

configs=${TREESYNC_CONFIGS:-"gcc clang clang-asan release"}
jobs=${TREESYNC_JOBS:-2}
repeat=${TREESYNC_REPEAT:-0}
repeat_label=${TREESYNC_REPEAT_LABEL:-timing}
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --repeat) repeat=${2:-}; shift 2 || shift ;;
    --repeat=*) repeat=${1#--repeat=}; shift ;;
    *) echo "tests/run.sh: unknown argument '$1' (usage: tests/run.sh [--quick] [--repeat N])" >&2; exit 1 ;;
  esac
done
if ! [[ $repeat =~ ^[0-9]+$ ]]; then
  echo "tests/run.sh: --repeat needs a number of runs (got '$repeat')" >&2
  exit 1
fi
ctest_args=(-j "$jobs" --output-on-failure --timeout 900)
if [ "$repeat" -gt 0 ]; then
  ctest_args+=(-L "$repeat_label" --repeat "until-fail:$repeat")
fi
if [ "$quick" = 1 ]; then
  configs=quick
  ctest_args+=(-LE "compile_fail|stress")
  export TREESYNC_DIFF_CASES=${TREESYNC_DIFF_CASES:-300}
fi

say() { printf '\n==== %s\n' "$*"; }

# ---- toolchain ---------------------------------------------------------------------------------
have_doctest() {
  local dir
  for dir in /usr/include /usr/local/include; do
    [ -f "$dir/doctest/doctest.h" ] && return 0
  done
  return 1
}
missing_tools() {
  local absent=() tool
  for tool in cmake ctest ninja g++ clang++ meson rsync; do
    command -v "$tool" >/dev/null 2>&1 || absent+=("$tool")
  done
  command -v pkg-config >/dev/null 2>&1 || command -v pkgconf >/dev/null 2>&1 || absent+=(pkg-config)
  have_doctest || absent+=(doctest)
  echo "${absent[*]:-}"
}

packages=(doctest-dev meson ninja-build pkgconf clang cmake g++ rsync)
missing=$(missing_tools)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "missing: $missing; installing ${packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update && apt-get install -y --no-install-recommends "${packages[@]}"
    missing=$(missing_tools)
  fi
fi
if [ -n "$missing" ]; then
  echo "tests/run.sh: missing: $missing" >&2
  echo "  install them with: apt-get install ${packages[*]}" >&2
  # meson and pkg-config only feed consumer tests, which then report themselves as skipped;
  # without rsync the CLI's filter_rsync group skips its comparison and says so
  for tool in $missing; do
    case $tool in
      meson | pkg-config | rsync) ;;
      *) echo "tests/run.sh: cannot continue without $tool" >&2; exit 1 ;;
    esac
  done
fi

# the sshfs suite's tools: optional (its tests skip, saying why, without them)
sshfs_packages=(sshfs fuse3 openssh-server openssh-client)
missing_sshfs_tools() {
  local absent=() tool
  for tool in sshfs fusermount3 ssh ssh-keygen; do
    command -v "$tool" >/dev/null 2>&1 || absent+=("$tool")
  done
  PATH=$PATH:/usr/sbin:/sbin command -v sshd >/dev/null 2>&1 || absent+=(sshd)
  echo "${absent[*]:-}"
}
missing=$(missing_sshfs_tools)
[ "$quick" = 1 ] && missing=""  # --quick runs no sshfs test
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "missing for the sshfs tests: $missing; installing ${sshfs_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update && apt-get install -y --no-install-recommends "${sshfs_packages[@]}"; } ||
    echo "tests/run.sh: could not install ${sshfs_packages[*]}: the sshfs tests will be skipped" >&2
  missing=$(missing_sshfs_tools)
fi
if [ -n "$missing" ]; then
  echo "tests/run.sh: missing $missing: the sshfs tests will be skipped (apt-get install ${sshfs_packages[*]})" >&2
fi

# Open MPI for the MPI tool and its tests (gcc configuration): optional (without it the MPI
# example is not built, and the summary says so)
mpi_packages=(libopenmpi-dev openmpi-bin)
have_mpi() { command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; }
if [ "$quick" = 0 ] && ! have_mpi && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "missing for the MPI tests: mpicxx/mpirun; installing ${mpi_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update && apt-get install -y --no-install-recommends "${mpi_packages[@]}"; } ||
    echo "tests/run.sh: could not install ${mpi_packages[*]}: the MPI tests will not be built" >&2
fi
mpi_note=""
if [ "$quick" = 0 ] && ! have_mpi; then
  mpi_note=" (MPI tests not built: no mpicxx/mpirun; apt-get install ${mpi_packages[*]})"
  echo "tests/run.sh:${mpi_note}" >&2
fi

# ---- ccache ------------------------------------------------------------------------------------
# Where ccache is on PATH, every compiler this run drives goes through it: the CMake builds
# (-DCMAKE_<LANG>_COMPILER_LAUNCHER=ccache, and the same variables in the environment for the
# consumer projects that ctest configures), the Meson builds (tests/run_meson.cmake,
# tests/consumers/meson_subproject.cmake: CXX="ccache <compiler>") and the Python wheel (meson
# picks ccache itself; python/ci_test.py sets CCACHE_BASEDIR to the unpacked sdist). The settings
# make a clone in another directory hit the cache: paths below the clone's root hashed relative
# (CCACHE_BASEDIR), the build directory not hashed (CCACHE_NOHASHDIR), the compiler known by its
# content (CCACHE_COMPILERCHECK=content). The cache is <ccache's cache_dir>/treesync
# (~/.cache/ccache/treesync by default); the summary gives each configuration's hits and misses.
# TREESYNC_CCACHE=0 turns it off (CCACHE_DISABLE=1 for everything the run compiles).
ccache_dir=""
if [ "${TREESYNC_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1 &&
   ccache_base=$(ccache -k cache_dir 2>/dev/null) && [ -n "$ccache_base" ]; then
  ccache_dir=$ccache_base/treesync
  export CCACHE_DIR=$ccache_dir CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
else
  # (a build directory configured with ccache before forgets it)
  launcher_args=(-UCMAKE_CXX_COMPILER_LAUNCHER -UCMAKE_C_COMPILER_LAUNCHER)
  [ "${TREESYNC_CCACHE:-1}" = 0 ] && export CCACHE_DISABLE=1
fi
ccache_counts() {  # "<hits> <misses>" of the cache so far
  ccache --print-stats 2>/dev/null | awk -F '\t' '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
    $1 == "cache_miss" { m += $2 }
    END { print h + 0, m + 0 }'
}
ccache_line() {  # the summary's line for the compilations since ccache_counts printed "$1 $2"
  [ -n "$ccache_dir" ] || return 0
  local now hits misses
  read -r hits misses <<<"$(ccache_counts)"
  hits=$((hits - $1)); misses=$((misses - $2))
  now=$((hits + misses))
  [ "$now" -gt 0 ] && now="$((hits * 100 / now))%" || now="-"
  results+=("  ccache: $hits hits, $misses misses ($now hits)")
}

say "toolchain"
cmake --version | head -n 1
echo "ninja $(ninja --version)"
g++ --version | head -n 1
clang++ --version | head -n 1
if command -v meson >/dev/null 2>&1; then echo "meson $(meson --version)"; fi
if [ -n "$ccache_dir" ]; then
  echo "$(ccache --version | head -n 1), cache $ccache_dir"
elif [ "${TREESYNC_CCACHE:-1}" = 0 ]; then
  echo "ccache: not used (TREESYNC_CCACHE=0)"
else
  echo "ccache: not used (not installed: apt-get install ccache)"
fi

# ---- configurations ----------------------------------------------------------------------------
config_args() {  # the compiler and cache options of one configuration
  case $1 in
    gcc) echo "-DCMAKE_CXX_COMPILER=g++ -DTREESYNC_TEST_SSHFS=ON -DTREESYNC_TEST_DIFF_SHARD=0/3" ;;
    # C++20 with clang++ is the sanitizer configuration's; consumers, Meson and MPI run with g++ only;
    # the sshfs suite with g++ and under the sanitizers
    clang) echo "-DCMAKE_CXX_COMPILER=clang++ -DTREESYNC_TEST_CXX_STANDARDS=17 -DTREESYNC_TEST_CONSUMERS=OFF -DTREESYNC_TEST_MESON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DTREESYNC_TEST_SSHFS=OFF -DTREESYNC_TEST_DIFF_SHARD=1/3" ;;
    clang-asan) echo "-DCMAKE_CXX_COMPILER=clang++ -DTREESYNC_SANITIZE=ON -DTREESYNC_TEST_CXX_STANDARDS=20 -DTREESYNC_TEST_CONSUMERS=OFF -DTREESYNC_TEST_MESON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DTREESYNC_TEST_SSHFS=ON -DTREESYNC_TEST_DIFF_SHARD=" ;;
    # what a user builds: Release, warnings not errors, the unit suite and the examples
    # tests/run.sh --quick: the check before a commit (see the header)
    quick) echo "-DCMAKE_CXX_COMPILER=g++ -DTREESYNC_TEST_CXX_STANDARDS=17 -DTREESYNC_TEST_CONSUMERS=OFF -DTREESYNC_TEST_MESON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DTREESYNC_TEST_SSHFS=OFF -DTREESYNC_TEST_DIFF_SHARD=" ;;
    release) echo "-DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=Release -DTREESYNC_WERROR=OFF -DTREESYNC_TEST_CXX_STANDARDS=17 -DTREESYNC_TEST_CONSUMERS=OFF -DTREESYNC_TEST_MESON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DTREESYNC_TEST_SSHFS=OFF -DTREESYNC_TEST_DIFF_SHARD=2/3" ;;
    *) return 1 ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

sum_total=0     # ctest results summed over the configurations that ran
sum_failed=0
results=()      # one line per configuration, printed at the end
status=0

for name in $configs; do
  if ! args=$(config_args "$name"); then
    echo "tests/run.sh: unknown configuration '$name'" >&2
    status=1
    break
  fi
  dir="build/$name"
  [ "${TREESYNC_CLEAN:-0}" = 1 ] && rm -rf "$dir"
  start=$SECONDS
  read -r ccache_hits ccache_misses <<<"$(ccache_counts)"

  say "$name: configure ($args)"
  # shellcheck disable=SC2086  # $args is a list of options
  if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTREESYNC_WERROR=ON "${launcher_args[@]}" $args; then
    results+=("$name: configure FAILED (counted as 1 failed test)")
    sum_total=$((sum_total + 1)); sum_failed=$((sum_failed + 1)); status=1
    break
  fi

  say "$name: build"
  if ! cmake --build "$dir" -j "$jobs"; then
    results+=("$name: build FAILED (counted as 1 failed test)")
    ccache_line "$ccache_hits" "$ccache_misses"
    sum_total=$((sum_total + 1)); sum_failed=$((sum_failed + 1)); status=1
    break
  fi

  say "$name: test"
  log="$dir/ctest.log"
  (cd "$dir" && ctest "${ctest_args[@]}") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    # no summary: no tests found, or ctest itself broke; count it as one failure
    results+=("$name: ctest printed no summary (exit $rc; counted as 1 failed test)")
    sum_total=$((sum_total + 1)); sum_failed=$((sum_failed + 1)); status=1
    break
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests failed out of.*/\1/' <<<"$line")
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  sum_total=$((sum_total + total)); sum_failed=$((sum_failed + failed))
  skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log")
  sshfs_note=""
  if [ -f "$dir/tests/sshfs-state/skip" ] && grep -qE '^[[:space:]]+[0-9]+ - sshfs\.fixture\.start \(Skipped\)$' "$log"; then
    sshfs_note=" (sshfs suite skipped: $(head -n 1 "$dir/tests/sshfs-state/skip"))"
  fi
  repeat_note=""
  [ "$repeat" -gt 0 ] && repeat_note=" (label $repeat_label, each test up to $repeat runs until it fails)"
  this_mpi_note=""
  [ "$name" = gcc ] && this_mpi_note=$mpi_note
  results+=("$name: $line, $skipped skipped$sshfs_note$this_mpi_note$repeat_note ($((SECONDS - start)) s)")
  ccache_line "$ccache_hits" "$ccache_misses"
  if [ "$rc" != 0 ] || [ "$failed" != 0 ]; then
    [ "$failed" = 0 ] && { sum_failed=$((sum_failed + 1)); sum_total=$((sum_total + 1)); }
    status=1
    break
  fi
done

say "summary"
for result in "${results[@]}"; do echo "  $result"; done
if [ "$status" != 0 ]; then
  echo "  stopped at the first failing configuration (of: $configs)"
fi
# ctest's rounding: the nearest integer, but never 100% with a failure
percent=$(awk -v t="$sum_total" -v f="$sum_failed" 'BEGIN {
  if (t == 0) { print 0; exit }
  p = (t - f) * 100 / t; if (f > 0 && p > 99) p = 99; printf "%d\n", p + 0.5 }')
echo
echo "${percent}% tests passed, ${sum_failed} tests failed out of ${sum_total}"
[ "$sum_total" -gt 0 ] || status=1
exit "$status"
