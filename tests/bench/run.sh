#!/usr/bin/env bash
# tests/bench/run.sh - the treesync benchmark: treesync against rsync, cp -a, tar | tar, a plain
# std::filesystem mirror (fs_mirror.cpp) and a bare getdents+fstatat walk (stat_walk.cpp, the
# floor), on trees it makes itself, on a fresh ext4 loop image, on tmpfs, on a FUSE filesystem
# that waits in every request (slowfs.c, a stand-in for NFS/Lustre) and on sshfs (a real network
# filesystem: SFTPv3 over loopback, whole-second mtimes, no ctime).
#
#   sudo tests/bench/run.sh [options]
#
#   --fs LIST              filesystems, from ext4,tmpfs,fuse,sshfs (default: all four)
#   --datasets LIST        on ext4: usr_include,synth,mem (default: all)
#   --tmpfs-datasets LIST  on tmpfs (default: usr_include)
#   --fuse-datasets LIST   on FUSE (default: usr_include)
#   --scenarios LIST       cold,noop,touch,modify,churn (default: all)
#   --fuse-scenarios LIST  on FUSE (default: cold,noop)
#   --tools LIST           programs: treesync,treesync-j,rsync,rsyncL,cp,tar,fs_mirror,walk,walk-j,
#                          and treesync-full,treesync-dirs,treesync-none (treesync-j with a state
#                          file, --state, at that --verify level; they restore their destination
#                          with their own full run and read every scenario from one source path)
#                          (default: all; treesync-j only when the CLI has --jobs; rsync, the
#                          reference of every ratio, always runs)
#   --fuse-tools LIST      on FUSE (default: all but rsyncL, cp and fs_mirror, which take minutes
#                          each there: rsync -a and tar | tar stand for them)
#   --runs N               timed runs per figure (default 5); --synth-runs N for the build
#                          tree (default 3); --tmpfs-runs N (default 3); --fuse-runs N (default
#                          3); --mem-runs N for the 200k-file tree (default 1)
#   --jobs N               threads for `treesync --jobs N` (when the CLI has it) and the
#                          threaded stat walk (default 16)
#   --fuse-delay-us N      latency of each FUSE request (default 50)
#   --fuse-shapes LIST     fuse (both trees behind the FUSE filesystem) and/or local (the source
#                          on the ext4 image, only the destination behind FUSE: the copy-back
#                          shape) (default: fuse)
#   --sshfs-shapes LIST    local (source on a local disk -> destination on the sshfs mount) and/or
#                          sshfs (both trees on the mount) (default: local,sshfs)
#   --sshfs-local FS       where the local source and the served directory live: tmpfs or ext4
#                          (the loop image) (default tmpfs)
#   --sshfs-datasets LIST  on sshfs (default: usr_include)
#   --sshfs-scenarios LIST on sshfs (default: cold,noop,churn)
#   --sshfs-tools LIST     on sshfs (default: treesync-j,rsync,tar,walk-j; serial treesync and
#                          rsync take minutes a run there)
#   --sshfs-runs N         timed runs per figure on sshfs (default: --runs, at most 3)
#   --out DIR              results directory (default build/bench-results)
#   --image-size SIZE      size of the sparse ext4 image (default 32G: every dataset's source and
#                          eleven destinations take about 20 GB and 2.9 million inodes)
#   --publish              copy results.md and results.svg to tests/bench/ (what the README shows)
#   --quick                a smoke test: usr_include only, 1 run, ext4 + FUSE (cold, noop)
#   --keep                 keep the work directory (trees, image) and leave nothing mounted
#
# sshfs: tests/sshfs/sshfs_fixture.sh starts a private sshd on 127.0.0.1 (generated keys, its own
# config, the stand-alone sftp-server logging every request) and mounts its directory with sshfs
# -o attr_timeout=0,entry_timeout=0,negative_timeout=0,dir_cache=no,no_contain_symlinks; it is
# stopped and unmounted on any exit. Where it cannot start, sshfs is skipped with its reason.
# treesync's warm no-op there is timed after an untimed settling run; the warm no-op's SFTP requests
# (counted in the sftp-server's log: write-type, data reads, opens for reading, stats, readdirs)
# and its system calls (strace -f -c) go to syscalls.csv.
#
# Needs root (mount, losetup, FUSE) and installs what it lacks with apt-get (rsync strace fuse3
# libfuse3-dev pkg-config cmake g++; sshfs openssh-server openssh-client openssh-sftp-server for
# sshfs). Builds the treesync CLI (CMake, Release) and the peers.
# Writes OUT/runs.csv (every timed run), syscalls.csv, datasets.csv (with the load average at the
# start and the end of each filesystem's and dataset's runs), verify.log (every program's
# destination compared with its source after its first run of each scenario), stderr.log, and
# the report: results.json, results.md, results.svg. --publish merges this run's figures into
# tests/bench/results.json (figures of filesystems and datasets not measured now are kept) and
# writes results.md and results.svg from it. Never run by the unit tests.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

fs_list=ext4,tmpfs,fuse,sshfs
datasets=usr_include,synth,mem
tmpfs_datasets=usr_include
fuse_datasets=usr_include
scenarios=cold,noop,touch,modify,churn
fuse_scenarios=cold,noop
tools=
fuse_tools=treesync,treesync-j,rsync,tar,walk,walk-j
runs=5
fuse_runs=3
fuse_shapes=fuse
tmpfs_runs=
synth_runs=3
mem_runs=1
jobs=16
delay_us=50
sshfs_shapes=local,sshfs
sshfs_local=tmpfs
sshfs_datasets=usr_include
sshfs_scenarios=cold,noop,churn
sshfs_tools=treesync-j,rsync,tar,walk-j
sshfs_runs=
out="$root/build/bench-results"
image_size=32G
publish=0
keep=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --fs) fs_list=$2; shift ;;
    --datasets) datasets=$2; shift ;;
    --tmpfs-datasets) tmpfs_datasets=$2; shift ;;
    --fuse-datasets) fuse_datasets=$2; shift ;;
    --scenarios) scenarios=$2; shift ;;
    --fuse-scenarios) fuse_scenarios=$2; shift ;;
    --tools) tools=$2; shift ;;
    --fuse-tools) fuse_tools=$2; shift ;;
    --runs) runs=$2; shift ;;
    --fuse-runs) fuse_runs=$2; shift ;;
    --tmpfs-runs) tmpfs_runs=$2; shift ;;
    --mem-runs) mem_runs=$2; shift ;;
    --synth-runs) synth_runs=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --fuse-delay-us) delay_us=$2; shift ;;
    --fuse-shapes) fuse_shapes=$2; shift ;;
    --sshfs-shapes) sshfs_shapes=$2; shift ;;
    --sshfs-local) sshfs_local=$2; shift ;;
    --sshfs-datasets) sshfs_datasets=$2; shift ;;
    --sshfs-scenarios) sshfs_scenarios=$2; shift ;;
    --sshfs-tools) sshfs_tools=$2; shift ;;
    --sshfs-runs) sshfs_runs=$2; shift ;;
    --out) out=$2; shift ;;
    --image-size) image_size=$2; shift ;;
    --publish) publish=1 ;;
    --keep) keep=1 ;;
    --quick) fs_list=ext4,fuse; datasets=usr_include; fuse_datasets=usr_include
             scenarios=cold,noop; fuse_scenarios=cold,noop; runs=1; fuse_runs=1 ;;
    -h|--help) usage 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage 1 >&2 ;;
  esac
  shift
done
has() { [[ ",$fs_list," == *",$1,"* ]]; }
: "${tmpfs_runs:=$(( runs < 3 ? runs : 3 ))}"
: "${sshfs_runs:=$(( runs < 3 ? runs : 3 ))}"
case $sshfs_local in tmpfs|ext4) ;; *) echo "run.sh: --sshfs-local is tmpfs or ext4" >&2; exit 1 ;; esac
for shape in ${sshfs_shapes//,/ }; do
  case $shape in local|sshfs) ;; *) echo "run.sh: unknown sshfs shape $shape (local, sshfs)" >&2; exit 1 ;; esac
done
say() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [[ $(id -u) != 0 ]]; then
  echo "run.sh: needs root (loop mounts, tmpfs, FUSE)" >&2
  exit 1
fi
# Everything started from here on (the measured programs, the FUSE daemon) runs at nice -20, so
# that other work on the machine (a shared CI or build box) disturbs the figures less. Every peer
# gets the same treatment.
renice -n -20 -p $$ >/dev/null

# ---- what it needs ------------------------------------------------------------------------------
need=()
for pair in rsync:rsync strace:strace cmake:cmake g++:g++ cc:gcc python3:python3 tar:tar \
            mkfs.ext4:e2fsprogs losetup:mount; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if has fuse; then
  command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  [[ -e /usr/include/fuse3/fuse.h ]] || need+=(libfuse3-dev)
fi
if has sshfs; then
  command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
  command -v sshfs >/dev/null 2>&1 || need+=(sshfs)
  command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
  PATH=$PATH:/usr/sbin:/sbin command -v sshd >/dev/null 2>&1 || need+=(openssh-server)
  [[ -x /usr/lib/openssh/sftp-server ]] || need+=(openssh-sftp-server)
fi
if ((${#need[@]})); then
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

# ---- build: the CLI with the project's CMake (Release), the peers with the compilers ----------
build="$root/build/bench"
bin="$build/bin"
mkdir -p "$bin"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
say "building the treesync CLI (Release) and the peers"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DTREESYNC_BUILD_TESTS=OFF -DTREESYNC_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" --target treesync_cli >/dev/null
ln -sf "$build/examples/treesync" "$bin/treesync"
cxx=${CXX:-g++}
c=${CC:-cc}
"$cxx" -std=c++17 -O2 -Wall -Wextra -pthread "$here/stat_walk.cpp" -o "$bin/stat_walk"
"$cxx" -std=c++17 -O2 -Wall -Wextra "$here/fs_mirror.cpp" -o "$bin/fs_mirror"
"$c" -std=c11 -O2 -Wall -Wextra "$here/timeit.c" -o "$bin/timeit"
if has fuse; then
  # shellcheck disable=SC2046
  "$c" -std=c11 -O2 -Wall -Wextra "$here/slowfs.c" -o "$bin/slowfs" $(pkg-config --cflags --libs fuse3)
fi
if "$bin/treesync" --help | grep -- --jobs >/dev/null; then  # not -q: a closed pipe fails the pipeline
  say "treesync has --jobs: measuring serial and --jobs $jobs"
else
  say "treesync has no --jobs yet: serial only"
fi

# ---- filesystems: mounted here, unmounted on any exit -------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/treesync-bench.XXXXXX")
ext4_mnt="$work/ext4"
tmpfs_mnt="$work/tmpfs"
fuse_mnt="$work/fuse"
sshfs_tmpfs="$work/sshfs-local"  # --sshfs-local tmpfs
sshfs_state=                      # the fixture's state directory, once started
fixture="$root/tests/sshfs/sshfs_fixture.sh"
cleanup() {
  set +e
  [[ -n $sshfs_state ]] && bash "$fixture" stop "$sshfs_state" >/dev/null
  mountpoint -q "$sshfs_tmpfs" 2>/dev/null && { umount "$sshfs_tmpfs" || umount -l "$sshfs_tmpfs"; }
  mountpoint -q "$fuse_mnt" 2>/dev/null && { fusermount3 -u "$fuse_mnt" || umount -l "$fuse_mnt"; }
  if mountpoint -q "$ext4_mnt" 2>/dev/null; then
    local dev
    dev=$(findmnt -no SOURCE "$ext4_mnt")
    umount "$ext4_mnt" || umount -l "$ext4_mnt"
    [[ $dev == /dev/loop* ]] && losetup "$dev" >/dev/null 2>&1 && losetup -d "$dev" 2>/dev/null
  fi
  mountpoint -q "$tmpfs_mnt" 2>/dev/null && umount "$tmpfs_mnt"
  if ((keep)); then
    echo "run.sh: work directory kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$out"
rm -f "$out"/{runs,syscalls,datasets}.csv "$out"/{verify,stderr}.log
started=$(date +%s)
# --keep: the trees go with the image or the tmpfs; deleting a million inodes takes minutes
bench() { python3 "$here/bench.py" --bin "$bin" --out "$out" --jobs "$jobs" --mem-runs "$mem_runs" --keep \
                   --synth-runs "$synth_runs" "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start=$(load)

if has ext4 || has fuse || { has sshfs && [[ $sshfs_local == ext4 ]]; }; then
  mkdir -p "$ext4_mnt"
  truncate -s "$image_size" "$work/ext4.img"
  # one inode per 4 KiB: every dataset with all its mirrors takes 2.9 million (-N 2500000 ran out
  # when the build tree and the 200k-file tree were measured in one run); inode tables initialised now, so that no
  # ext4lazyinit thread writes in the background while we measure
  mkfs.ext4 -q -F -i 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$work/ext4.img"
  mount -o loop "$work/ext4.img" "$ext4_mnt"
  say "ext4 image $image_size on $(findmnt -no SOURCE "$ext4_mnt") at $ext4_mnt"
fi
if has ext4; then
  bench --fs ext4 --root "$ext4_mnt/bench" --datasets "$datasets" --scenarios "$scenarios" \
        --runs "$runs" --tools "$tools" --strace
fi
if has tmpfs; then
  mkdir -p "$tmpfs_mnt"
  mount -t tmpfs -o size="$image_size",nr_inodes=0 tmpfs "$tmpfs_mnt"
  bench --fs tmpfs --root "$tmpfs_mnt/bench" --datasets "$tmpfs_datasets" --scenarios "$scenarios" \
        --runs "$tmpfs_runs" --tools "$tools" --strace
  umount "$tmpfs_mnt"
fi
if has fuse; then
  # the trees live on the ext4 image; the measured programs see them through slowfs
  mkdir -p "$ext4_mnt/fuse-backing" "$fuse_mnt"
  "$bin/slowfs" "$ext4_mnt/fuse-backing" "$fuse_mnt" -o delay_us="$delay_us" \
                -o max_threads=64,max_idle_threads=64,clone_fd
  say "slowfs at $fuse_mnt: ${delay_us} us per request"
  for shape in ${fuse_shapes//,/ }; do
    if [[ $shape == local ]]; then
      mkdir -p "$ext4_mnt/fuse-local-src"
      bench --fs local-fuse --root "$ext4_mnt/fuse-backing" --view "$fuse_mnt" --datasets "$fuse_datasets" \
            --scenarios "$fuse_scenarios" --runs "$fuse_runs" --tools "$fuse_tools" \
            --src-root "$ext4_mnt/fuse-local-src"
    else
      bench --fs fuse --root "$ext4_mnt/fuse-backing" --view "$fuse_mnt" --datasets "$fuse_datasets" \
            --scenarios "$fuse_scenarios" --runs "$fuse_runs" --tools "$fuse_tools"
    fi
  done
fi
sshfs_note=
if has sshfs; then
  # the served directory (remote/), the local sources and the fixture's keys and logs: on a tmpfs
  # of their own or on the ext4 image
  if [[ $sshfs_local == tmpfs ]]; then
    mkdir -p "$sshfs_tmpfs"
    mount -t tmpfs -o size="$image_size",nr_inodes=0 tmpfs "$sshfs_tmpfs"
    local_dir=$sshfs_tmpfs
  else
    local_dir=$ext4_mnt/sshfs-local
    mkdir -p "$local_dir"
  fi
  sshfs_state=$local_dir/fixture
  set +e
  fixture_out=$(bash "$fixture" start "$sshfs_state" 2>&1)
  fixture_rc=$?
  set -e
  if ((fixture_rc == 0)); then
    say "$fixture_out"
    # the fixture's sftp-server logs every request; each run's share is counted, then cleared
    sshfs_common=(--root "$sshfs_state/remote/bench" --view "$sshfs_state/mnt/bench"
                  --datasets "$sshfs_datasets" --scenarios "$sshfs_scenarios" --runs "$sshfs_runs"
                  --tools "$sshfs_tools" --settle --strace --sftp-log "$sshfs_state/sftp.log"
                  --mtime-resolution-ns 1000000000 --rsync-omit-link-times)
    for shape in ${sshfs_shapes//,/ }; do
      if [[ $shape == local ]]; then
        bench --fs local-sshfs "${sshfs_common[@]}" --src-root "$local_dir/src"
      else
        bench --fs sshfs-sshfs "${sshfs_common[@]}"
      fi
    done
    sshfs_note="sshfs $(sshfs --version 2>&1 | sed -n 's/^SSHFS version //p') over loopback to a private sshd ($(ssh -V 2>&1 | cut -d, -f1)), stand-alone sftp-server logging every request (-l DEBUG1); mount options attr_timeout=0, entry_timeout=0, negative_timeout=0, dir_cache=no, no_contain_symlinks (tests/sshfs/sshfs_fixture.sh); served directory and local sources on $sshfs_local; treesync's warm no-op is timed after an untimed settling run; rsync with --omit-link-times (sshfs sets a symlink's times through the link, so rsync -a fails with exit 23 on a link made before its target)"
  else
    sshfs_note="not measured: $(printf '%s' "$fixture_out" | tr -d '"\\' | tr '\n' ' ')"
    say "sshfs: $fixture_out"
  fi
  bash "$fixture" stop "$sshfs_state" >/dev/null
  sshfs_state=
  mountpoint -q "$sshfs_tmpfs" 2>/dev/null && umount "$sshfs_tmpfs"
fi

# ---- report ---------------------------------------------------------------------------------------
versions=$(printf '%s\n' "$(rsync --version | head -1 | sed 's/  */ /g')" "$(tar --version | head -1)" \
           "$(cp --version | head -1)" "$("$cxx" --version | head -1)" | python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin if l.strip()]))')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo)
cat > "$out/meta.json" <<EOF
{
  "date": "$(date -u +%Y-%m-%d)",
  "machine": "$(nproc) cores ($cpu), $mem, Linux $(uname -r)",
  "commit": "$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)",
  "runs": $runs, "tmpfs_runs": $tmpfs_runs, "synth_runs": $synth_runs, "fuse_runs": $fuse_runs, "mem_runs": $mem_runs, "sshfs_runs": $sshfs_runs, "jobs": $jobs,
  "fs": "$fs_list",
  "fuse": "slowfs.c, libfuse3 high-level passthrough of a directory on the ext4 image, ${delay_us} us per request, attr/entry/negative timeouts 0, 64 worker threads",
  "sshfs": "$sshfs_note",
  "versions": $versions,
  "nice": $(nice),
  "elapsed_s": $(( $(date +%s) - started )),
  "loadavg_start": "$load_start", "loadavg_end": "$(load)"
}
EOF
python3 "$here/report.py" "$out"
if ((publish)); then
  # this run's figures replace those of the same filesystems and datasets; the others are kept
  python3 "$here/report.py" "$out" --merge "$here/results.json" --into "$here"
  say "published tests/bench/results.json, results.md and results.svg"
fi
say "done in $(( $(date +%s) - started )) s; results in $out"
grep -q DIFFERENT "$out/verify.log" 2>/dev/null && say "WARNING: some destinations differ from their source: $out/verify.log"
exit 0
