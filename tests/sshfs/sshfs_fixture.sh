#!/usr/bin/env bash
# tests/sshfs/sshfs_fixture.sh - a private sshd on 127.0.0.1 and an sshfs mount of it, for running
# the real-filesystem tests over a real network filesystem (SFTPv3: whole-second mtimes, no ctime).
#
#   sshfs_fixture.sh start STATE_DIR   start sshd, mount STATE_DIR/remote at STATE_DIR/mnt
#   sshfs_fixture.sh stop  STATE_DIR   unmount and stop that sshd; safe to repeat, and after a
#                                      partial or failed start
#   sshfs_fixture.sh status STATE_DIR  exit 0 if the mount is up, else print why not and exit 77
#   sshfs_fixture.sh run STATE_DIR [--local-src] CMD [ARGS...]
#                                      run CMD with TREESYNC_TEST_TMPDIR=STATE_DIR/mnt/tests (where
#                                      tests/support/temp_dir.hpp creates its directories) and
#                                      TREESYNC_TEST_SSHFS_STATE=STATE_DIR; with --local-src also
#                                      TREESYNC_TEST_SRC_TMPDIR=STATE_DIR/local-src (a local disk).
#                                      When the mount is not up: print why and exit 77 (a skip)
#
# Everything lives in STATE_DIR (created if missing): generated host and client keys, sshd_config,
# ssh_config (empty), sshd.pid, sshd.log, sftp.log, the served directory remote/, the mount point
# mnt/ and local-src/ (the local->sshfs tests' sources). The system's sshd, its keys and ~/.ssh are
# never used. The SFTP server is the stand-alone sftp-server rather than internal-sftp, because its
# log (-e -l DEBUG1, one line per request with the server-side path: open with its flags, read,
# write, set mode/modtime, rename, remove, mkdir, lstat, ...) can go to a file of ours, sftp.log,
# where tests/test_sshfs.cpp counts requests; sshd starts it through the user's login shell, like
# any subsystem command. On success `start` writes STATE_DIR/ready (key=value lines: mount,
# remote, port, log, sftp_log, pid) and removes STATE_DIR/skip. A `start` also cleans up what an
# interrupted run left (mount, sshd, test directories).
#
# Exit status: 0 done; 77 sshfs cannot run here (no FUSE, no sshfs, no sshd, sshd or the mount does
# not start...): one line on stdout says exactly why, starting "treesync-skip:", and the same
# reason is kept in STATE_DIR/skip for the tests that need the mount; 2 usage error. With
# TREESYNC_REQUIRE_SSHFS=1 a `start` that cannot run fails (status 1) instead of skipping: for a
# machine where the sshfs suite must run.
set -uo pipefail

SKIP=77

usage() {
  echo "usage: $0 start|stop|status STATE_DIR  |  $0 run STATE_DIR [--local-src] CMD [ARGS...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
cmd=$1
case $2 in
  /*) state=$2 ;;
  *) state=$PWD/$2 ;;
esac
[ "$cmd" = start ] && mkdir -p "$state"
# one spelling of the path, the one /proc/mounts shows (no '..', no symlinks)
if [ -d "$state" ]; then state=$(cd "$state" && pwd -P); fi

mnt=$state/mnt
remote=$state/remote
log=$state/sshd.log
sftp_log=$state/sftp.log
pidfile=$state/sshd.pid

# skip REASON: say why the sshfs tests cannot run, remember it for them, undo any partial start
skip() {
  local reason="$*"
  printf 'treesync-skip: sshfs tests skipped: %s\n' "$reason"
  stop_all >/dev/null 2>&1
  mkdir -p "$state" 2>/dev/null && printf '%s\n' "$reason" >"$state/skip"
  rm -f "$state/ready"
  if [ "${TREESYNC_REQUIRE_SSHFS:-0}" = 1 ] && [ "$cmd" = start ]; then
    echo "sshfs_fixture: TREESYNC_REQUIRE_SSHFS=1: failing instead of skipping" >&2
    exit 1
  fi
  exit "$SKIP"
}

is_mounted() {  # the mount point is an sshfs mount (any state, even a dead connection)
  local dev mp fstype rest want
  want=${mnt//\\/\\134}  # /proc/mounts escapes '\', space, tab and newline in octal
  want=${want// /\\040}
  want=${want//$'\t'/\\011}
  want=${want//$'\n'/\\012}
  while read -r dev mp fstype rest; do
    [ "$mp" = "$want" ] && [ "$fstype" = fuse.sshfs ] && return 0
  done </proc/self/mounts
  return 1
}

stop_all() {
  local i pid
  if is_mounted; then
    # a plain unmount first; a busy mount (a test still in it, a cwd) is detached lazily
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null ||
      fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
    for i in $(seq 50); do
      is_mounted || break
      sleep 0.1
    done
    if is_mounted; then
      echo "sshfs_fixture: could not unmount $mnt" >&2
    fi
  fi
  # the sshfs client process of this mount (gone once unmounted; a leftover after a failed mount),
  # only if it still is ours: its command line names our ssh_config
  if [ -f "$state/sshfs.pid" ]; then
    pid=$(cat "$state/sshfs.pid" 2>/dev/null)
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/ssh_config"; then
      kill "$pid" 2>/dev/null
    fi
    rm -f "$state/sshfs.pid"
  fi
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile" 2>/dev/null)
    # only the sshd this fixture started: its command line names our config file
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/sshd_config"; then
      kill "$pid" 2>/dev/null
      for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$pidfile"
  fi
  rm -f "$state/ready"
}

port_free() {  # nothing accepts connections on 127.0.0.1:$1 (best effort; sshd's bind decides)
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  local tool sshd_bin port attempt out reason pid i

  mkdir -p "$state" || { echo "sshfs_fixture: cannot create $state" >&2; exit 1; }
  stop_all  # a previous run's leftovers
  rm -f "$state/skip"

  # ---- what is needed, and why not -------------------------------------------------------------
  [ -e /dev/fuse ] || skip "/dev/fuse does not exist (no FUSE in this kernel or container)"
  [ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not readable and writable by $(id -un)"
  for tool in sshfs fusermount3 ssh ssh-keygen; do
    command -v "$tool" >/dev/null 2>&1 ||
      skip "$tool not found in PATH (Debian: apt-get install sshfs fuse3 openssh-client)"
  done
  sshd_bin=$(PATH=$PATH:/usr/sbin:/sbin:/usr/local/sbin command -v sshd) ||
    skip "sshd not found (Debian: apt-get install openssh-server)"
  case $sshd_bin in /*) ;; *) skip "sshd is not an absolute path: $sshd_bin" ;; esac
  # the stand-alone SFTP server, not internal-sftp: its -e log goes to a file of ours
  sftp_server=
  for tool in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server \
              /usr/lib/ssh/sftp-server /usr/local/libexec/sftp-server; do
    [ -x "$tool" ] && { sftp_server=$tool; break; }
  done
  [ -n "$sftp_server" ] || skip "sftp-server not found (Debian: apt-get install openssh-sftp-server)"
  if [ ! -d /run/sshd ]; then  # sshd's privilege-separation directory
    mkdir -p -m 0755 /run/sshd 2>/dev/null || skip "/run/sshd is missing and cannot be created (sshd needs it)"
  fi

  # ---- keys, config -----------------------------------------------------------------------------
  mkdir -p "$remote" "$mnt" || exit 1
  local d
  for d in "$remote/tests" "$state/local-src"; do  # what tests killed midway left behind
    [ -d "$d" ] && { chmod -R u+rwx "$d" 2>/dev/null; rm -rf "$d"; }
  done
  chmod 0700 "$state"
  for key in host_key client_key; do
    if [ ! -f "$state/$key" ]; then
      rm -f "$state/$key.pub"
      ssh-keygen -q -t ed25519 -N '' -C "treesync-sshfs-fixture" -f "$state/$key" </dev/null >/dev/null ||
        skip "ssh-keygen failed to generate $state/$key"
    fi
  done
  cp "$state/client_key.pub" "$state/authorized_keys"
  chmod 0600 "$state/authorized_keys"
  : >"$state/ssh_config"  # an empty client config: ~/.ssh/config and /etc/ssh/ssh_config do not apply

  # ---- sshd on a free port ------------------------------------------------------------------------
  : >"$log"
  : >"$sftp_log"
  port=
  for attempt in $(seq 10); do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM + $$ + attempt * 7919) % 12000 ))
    port_free "$port" || { port=; continue; }
    cat >"$state/sshd_config" <<CONF
# generated by tests/sshfs/sshfs_fixture.sh: a private sshd for the sshfs tests
ListenAddress 127.0.0.1:$port
HostKey "$state/host_key"
PidFile "$pidfile"
AuthorizedKeysFile "$state/authorized_keys"
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $(id -un)
StrictModes no
UsePAM no
UseDNS no
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
MaxStartups 100
LogLevel VERBOSE
# every SFTP request logged, to sftp.log (sshd unquotes the line, then the login shell runs it:
# the single quotes are for the shell)
Subsystem sftp $sftp_server -e -l DEBUG1 "2>>'$sftp_log'"
CONF
    out=$("$sshd_bin" -t -f "$state/sshd_config" 2>&1) || skip "sshd rejects the generated config: ${out//$'\n'/ }"
    # sshd binds before it daemonizes: a port taken meanwhile fails here, and the next one is tried
    if out=$("$sshd_bin" -f "$state/sshd_config" -E "$log" 2>&1); then
      break
    fi
    port=
  done
  [ -n "$port" ] ||
    skip "sshd did not start on 127.0.0.1 (10 ports tried): ${out//$'\n'/ } $(tail -n 2 "$log" | tr '\n' ' ')"
  pid=
  for i in $(seq 50); do
    pid=$(cat "$pidfile" 2>/dev/null) && [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null ||
    skip "sshd exited after starting: $(tail -n 2 "$log" | tr '\n' ' ')"

  # ---- the mount --------------------------------------------------------------------------------
  # attr/entry/negative_timeout=0 and dir_cache=no: every stat and lookup reaches the server, so
  # what the tests see is what the server holds; no_contain_symlinks: keep link targets with '..'
  local opts="port=$port,IdentityFile=\"$state/client_key\",IdentitiesOnly=yes,BatchMode=yes"
  opts+=",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR,ConnectTimeout=10"
  opts+=",attr_timeout=0,entry_timeout=0,negative_timeout=0,dir_cache=no,no_contain_symlinks"
  if ! out=$(sshfs -F "$state/ssh_config" -o "$opts" "$(id -un)@127.0.0.1:$remote" "$mnt" 2>&1); then
    skip "sshfs failed to mount 127.0.0.1:$port:$remote: ${out//$'\n'/ }"
  fi
  for i in $(seq 50); do
    is_mounted && break
    sleep 0.1
  done
  is_mounted || skip "sshfs returned but $mnt is not mounted"
  for pid in $(pgrep -x sshfs); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/ssh_config"; then
      echo "$pid" >"$state/sshfs.pid"
    fi
  done
  pid=$(cat "$pidfile")

  # a round trip through the mount, so a mount that answers nothing is caught here
  local probe=$mnt/.fixture-probe-$$
  if ! out=$( { echo probe >"$probe" && [ "$(cat "$remote/.fixture-probe-$$")" = probe ] && rm -f "$probe"; } 2>&1); then
    skip "the sshfs mount at $mnt does not work: ${out//$'\n'/ }"
  fi

  cat >"$state/ready" <<READY
mount=$mnt
remote=$remote
port=$port
log=$log
sftp_log=$sftp_log
pid=$pid
READY
  echo "sshfs_fixture: sshd pid $pid on 127.0.0.1:$port, $remote mounted at $mnt (sshfs $(sshfs --version 2>&1 | sed -n 's/^SSHFS version //p'))"
}

status() {
  if [ -f "$state/ready" ] && is_mounted; then
    return 0
  fi
  if [ -f "$state/skip" ]; then
    printf 'treesync-skip: sshfs tests skipped: %s\n' "$(cat "$state/skip")"
  else
    printf 'treesync-skip: sshfs tests skipped: the sshfs fixture is not running (%s start %s)\n' "$0" "$state"
  fi
  exit "$SKIP"
}

run() {
  status
  mkdir -p "$mnt/tests" || exit 1
  export TREESYNC_TEST_TMPDIR=$mnt/tests TREESYNC_TEST_SSHFS_STATE=$state
  unset TREESYNC_TEST_SRC_TMPDIR
  if [ "${1:-}" = --local-src ]; then
    shift
    mkdir -p "$state/local-src" || exit 1
    export TREESYNC_TEST_SRC_TMPDIR=$state/local-src
  fi
  [ $# -gt 0 ] || usage
  exec "$@"
}

case $cmd in
  start) [ $# -eq 2 ] || usage; start ;;
  stop) [ $# -eq 2 ] || usage; stop_all; echo "sshfs_fixture: stopped ($state)" ;;
  status) [ $# -eq 2 ] || usage; status ;;
  run) shift 2; run "$@" ;;
  *) usage ;;
esac
