// examples/cli/signals.hpp - SIGINT and SIGTERM for the treesync tools (examples/treesync.cpp,
// examples/treesync_mpi.cpp).
//
// The first signal sets cancel_flag (passed to treesync::cancel_on: no new work is started) and is
// remembered in first_signal, so the run ends (keeping every file it finished), prints its report of
// what was done and exits with 20, rsync's status for a signal.  A second signal exits at once
// (_exit) with the same status, printing nothing more.
#ifndef TREESYNC_CLI_SIGNALS_HPP
#define TREESYNC_CLI_SIGNALS_HPP

#include <atomic>
#include <csignal>
#include <cstring>

#include <signal.h>
#include <unistd.h>

namespace treesync_cli {

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");
inline std::atomic<bool> cancel_flag{false};  // passed to treesync::cancel_on
inline std::atomic<int> first_signal{0};      // the first SIGINT / SIGTERM, 0 while none came

/// The exit status of a run interrupted by `sig`: 20 for SIGINT and SIGTERM alike, as rsync
/// ("received SIGINT, SIGTERM, or SIGHUP (code 20)"); scripts written for rsync test for it.
inline int interrupted_exit_code(int sig) noexcept { return (void)sig, 20; }

namespace signal_detail {
extern "C" {
// Async-signal-safe: lock-free atomic operations and _exit only.
inline void on_signal(int sig) {
  if (first_signal.exchange(sig) != 0) _exit(interrupted_exit_code(sig));  // a second signal
  cancel_flag.store(true);
}
}
}  // namespace signal_detail

inline void install_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = signal_detail::on_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = 0;  // no SA_RESTART: a call blocked when the signal arrives returns (EINTR) and the run stops
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_SIGNALS_HPP
