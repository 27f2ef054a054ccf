// examples/cli/progress.hpp - --progress (and --info=progress2): one live line with the bytes and
// entries done against the source tree's totals, percentage, rate, ETA and the latest entry.
// Part of the treesync example CLI (examples/treesync.cpp).
//
// Where the numbers come from:
//  - the totals: a second run of the engine, started next to the real one, a dry run with the same
//    filter rules, links, -x, --specials and -H into a destination that does not exist, so that
//    every source entry the mirror would carry is reported once as created.  It counts the
//    entries (the root excluded) and the bytes of the regular files.  Until it has finished the
//    totals are "so far": the line marks them with '+' and shows neither a percentage nor an ETA.
//  - what is done: the real run's actions (entries created, updated, skipped, failed...; the
//    bytes of the files written) plus the files its comparison found current (their bytes too).
//    Unchanged directories and symlinks are not reported by the engine, so the count of entries
//    done may lag behind; when the run has completed, every entry has been checked, and the last
//    line says so (to-chk=0/M).
//
// The line is drawn by a thread of its own, at most 10 times a second on a terminal (the width
// read with TIOCGWINSZ each time, 80 without one) and once a second with --progress=always on
// anything else, where each update is a line of its own; the last line is drawn after the run,
// before any other output, and ends with a newline.
#ifndef TREESYNC_CLI_PROGRESS_HPP
#define TREESYNC_CLI_PROGRESS_HPP

#include "text.hpp"

#include <treesync/treesync.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace treesync_cli {

/// The columns of the terminal on `fd`, 80 when it is none or does not say.
inline std::size_t terminal_width(int fd) {
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

/// 1234567 -> "1,234,567"
inline std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k != 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

/// Seconds as H:MM:SS.
inline std::string clock_time(double secs) {
  if (!(secs >= 0)) secs = 0;
  if (secs > 359999999.0) secs = 359999999.0;  // 99999 hours: the field stays bounded
  const auto s = static_cast<std::uint64_t>(secs + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu:%02u:%02u", static_cast<unsigned long long>(s / 3600),
                static_cast<unsigned>(s / 60 % 60), static_cast<unsigned>(s % 60));
  return buf;
}

/// One state of the line.
struct progress_state {
  std::uint64_t bytes_done = 0, bytes_total = 0;
  std::uint64_t entries_done = 0, entries_total = 0;
  bool totals_final = false;  // the count of the source has finished
  bool last = false;          // the line drawn after the run
  double seconds = 0;         // since the start
  std::string name;           // the latest entry, display()ed
};

/// The progress line `line` with the latest entry's `name` after it, cut to a terminal of `width`
/// columns (0: no terminal, nothing cut): the numbers never wrap, the name keeps its end.
inline std::string fit_progress_line(std::string line, const std::string& name, std::size_t width) {
  if (width == 0) return name.empty() ? line : line + ' ' + name;
  // a terminal narrower than the numbers: they are cut, the line must not wrap (all ASCII so far)
  if (width < 2) return std::string();
  if (line.size() > width - 1) line.resize(width - 1);
  if (name.empty()) return line;
  // columns, counted as code points (display() output is valid UTF-8)
  const auto columns = [](std::string_view t) {
    std::size_t n = 0;
    for (char c : t)
      if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
    return n;
  };
  const std::size_t used = columns(line) + 1;
  if (used + 4 > width - 1) return line;  // no room for a name worth showing
  const std::size_t room = width - 1 - used;
  if (columns(name) <= room) return line + ' ' + name;
  // keep the end of the name: the last `room - 3` code points
  std::size_t keep = room - 3, start = name.size();
  while (start > 0 && keep > 0) {
    --start;
    if ((static_cast<unsigned char>(name[start]) & 0xc0) != 0x80) --keep;
  }
  return line + " ..." + name.substr(start);
}

/// The text of the line (no '\r', no newline).  `width` > 0 (a terminal): the bytes in KiB, MiB...
/// and at most width - 1 columns, the name shortened from the left ("...") or left out to fit;
/// 0 (a log): exact byte counts, no limit.
///   12.3 MiB/38.1 MiB  32% 5.6 MiB/s ETA 0:00:04 to-chk=1385/2020 dir3/f9.dat        (terminal)
///   12,897,484/39,942,144  32% 5.6 MiB/s ETA 0:00:04 to-chk=1385/2020 dir3/f9.dat    (log)
/// While the totals are still being counted: "12.3 MiB/20.0 MiB+ --% 5.6 MiB/s ETA -:--:--
/// ir-chk=900/1500+ ...".  The last line shows the elapsed time ("in 0:00:03") instead of the ETA.
inline std::string progress_line(const progress_state& s, std::size_t width) {
  const bool final_totals = s.totals_final;
  // what the run has done is part of the tree too: a total still counted is at least that
  const std::uint64_t total = final_totals || s.bytes_total > s.bytes_done ? s.bytes_total : s.bytes_done;
  const std::uint64_t entries_total =
      final_totals || s.entries_total > s.entries_done ? s.entries_total : s.entries_done;
  const std::uint64_t done = s.bytes_done > total ? total : s.bytes_done;
  const auto bytes = [width](std::uint64_t n) {
    return width == 0 ? with_commas(n) : human_bytes(static_cast<double>(n));
  };
  std::string line = bytes(done) + '/' + bytes(total) + (final_totals ? "" : "+");
  char buf[64];
  if (final_totals) {
    unsigned pct = 100;
    if (total > 0)
      pct = static_cast<unsigned>(static_cast<double>(done) * 100.0 / static_cast<double>(total));
    else if (entries_total > 0 && s.entries_done < entries_total)
      pct = static_cast<unsigned>(static_cast<double>(s.entries_done) * 100.0 /
                                  static_cast<double>(entries_total));
    if (pct > 100) pct = 100;
    std::snprintf(buf, sizeof buf, " %3u%%", pct);
    line += buf;
  } else {
    line += "  --%";
  }
  const double rate = s.seconds > 0 ? static_cast<double>(done) / s.seconds : 0.0;
  line += ' ' + human_bytes(rate) + "/s";
  if (s.last) {
    line += " in " + clock_time(s.seconds);
  } else if (final_totals && done >= total) {
    line += " ETA " + clock_time(0);
  } else if (final_totals && rate > 0) {
    line += " ETA " + clock_time(static_cast<double>(total - done) / rate);
  } else {
    line += " ETA -:--:--";
  }
  const std::uint64_t entries_done = s.entries_done > entries_total ? entries_total : s.entries_done;
  line += final_totals ? " to-chk=" : " ir-chk=";
  line += std::to_string(entries_total - entries_done) + '/' + std::to_string(entries_total);
  if (!final_totals) line += '+';
  return fit_progress_line(std::move(line), s.name, width);
}

/// The progress meter: counters fed by the run's observer and comparison and by the counting
/// run, and the thread that draws the line on stdout.
class progress_meter {
 public:
  /// `terminal`: redraw one line in place (stdout is a terminal); otherwise a line per update.
  explicit progress_meter(bool terminal) : terminal_(terminal) {}
  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;
  ~progress_meter() { stop_threads(); }

  // ---- the real run (called under the engine's observer lock, or from its workers) ----

  void on_action(const treesync::action& a) {
    using treesync::action_kind;
    const bool regular = a.type == treesync::file_type::regular;
    if ((a.kind == action_kind::create || a.kind == action_kind::update) && regular)
      bytes_done_.fetch_add(a.src_size, std::memory_order_relaxed);
    if (a.path.empty() || a.kind == action_kind::remove) return;
    // a regular file found current and re-stamped was counted by on_current()
    if (a.kind == action_kind::update_meta && regular && counting_current_) return;
    entries_done_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(name_mu_);
    name_.assign(a.path.data(), a.path.size());
  }

  /// A file the comparison found current (its data is done).
  void on_current(std::uint64_t size) {
    bytes_done_.fetch_add(size, std::memory_order_relaxed);
    entries_done_.fetch_add(1, std::memory_order_relaxed);
  }
  /// Whether on_current() is to be called (by default it is).
  void set_counting_current(bool on) { counting_current_ = on; }
  bool counting_current() const noexcept { return counting_current_; }

  // ---- the counting run ----

  void on_counted(const treesync::action& a) {
    if (a.path.empty() || a.kind == treesync::action_kind::remove) return;
    if ((a.kind == treesync::action_kind::create || a.kind == treesync::action_kind::update) &&
        a.type == treesync::file_type::regular)
      bytes_total_.fetch_add(a.src_size, std::memory_order_relaxed);
    entries_total_.fetch_add(1, std::memory_order_relaxed);
  }
  /// The flag the counting run is cancelled with.
  const std::atomic<bool>* count_cancel() const noexcept { return &count_stop_; }

  // ---- the threads ----

  /// Starts `count` (the counting run; returns whether it covered the whole source) and the
  /// drawing, each on a thread of its own with SIGINT and SIGTERM blocked (they are the main
  /// thread's to handle).  `cancel`: the run's cancel flag (SIGINT, SIGTERM), which also stops a
  /// count that finish() waits for.
  void start(std::function<bool()> count, const std::atomic<bool>* cancel) {
    cancel_ = cancel;
    start_ = std::chrono::steady_clock::now();
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    counter_ = std::thread([this, count = std::move(count)] {
      const bool whole = count();
      totals_final_.store(whole, std::memory_order_release);
      {
        std::lock_guard<std::mutex> lock(draw_mu_);
        counted_ = true;
      }
      wake_.notify_all();
    });
    drawer_ = std::thread([this] { draw_loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  /// After the run, before any other output: stops the drawing and draws the last line.
  /// `completed`: the run went through the whole tree (not refused, not interrupted): the count
  /// is waited for, and every entry counts as checked.  Otherwise the count is cancelled.
  /// `refused`: the run was refused before it started: no last line unless one was drawn already.
  void finish(bool completed, bool refused) {
    if (!completed) count_stop_.store(true);
    if (counter_.joinable()) {
      std::unique_lock<std::mutex> lock(draw_mu_);
      while (!counted_) {  // a signal now still stops the count
        if (cancel_ && cancel_->load()) count_stop_.store(true);
        wake_.wait_for(lock, std::chrono::milliseconds(50));
      }
    }
    if (counter_.joinable()) counter_.join();
    {
      std::lock_guard<std::mutex> lock(draw_mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (drawer_.joinable()) drawer_.join();
    if (refused && !drawn_) return;
    progress_state s = snapshot();
    s.last = true;
    if (completed && s.totals_final) s.entries_done = s.entries_total;
    draw(s);
    if (terminal_) std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  progress_state snapshot() {
    progress_state s;
    s.bytes_done = bytes_done_.load(std::memory_order_relaxed);
    s.entries_done = entries_done_.load(std::memory_order_relaxed);
    s.totals_final = totals_final_.load(std::memory_order_acquire);
    s.bytes_total = bytes_total_.load(std::memory_order_relaxed);
    s.entries_total = entries_total_.load(std::memory_order_relaxed);
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::lock_guard<std::mutex> lock(name_mu_);
    if (!name_.empty()) s.name = display(name_);
    return s;
  }

  void draw(const progress_state& s) {
    drawn_ = true;
    const std::size_t width = terminal_ ? terminal_width(STDOUT_FILENO) : 0;
    const std::string text = progress_line(s, width);
    if (terminal_) {
      // overwrite the previous line; pad with spaces instead of terminal escapes, never past the
      // last column but one (the terminal may have narrowed since)
      std::size_t len = 0;
      for (char c : text)
        if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++len;
      const std::size_t cover = shown_ < width ? shown_ : width - 1;
      std::fprintf(stdout, "\r%s%*s", text.c_str(), static_cast<int>(cover > len ? cover - len : 0), "");
      shown_ = len;
    } else {
      std::fprintf(stdout, "%s\n", text.c_str());
    }
    std::fflush(stdout);
  }

  void draw_loop() {
    const auto period = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
    std::unique_lock<std::mutex> lock(draw_mu_);
    for (;;) {
      if (wake_.wait_for(lock, period, [this] { return stopping_; })) return;
      lock.unlock();  // a slow terminal must not hold up finish() or the count's end
      draw(snapshot());
      lock.lock();
    }
  }

  void stop_threads() {
    count_stop_.store(true);
    if (counter_.joinable()) counter_.join();
    {
      std::lock_guard<std::mutex> lock(draw_mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (drawer_.joinable()) drawer_.join();
  }

  const bool terminal_;
  bool counting_current_ = true;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> bytes_done_{0}, entries_done_{0};
  std::atomic<std::uint64_t> bytes_total_{0}, entries_total_{0};
  std::atomic<bool> totals_final_{false};
  std::atomic<bool> count_stop_{false};
  std::mutex name_mu_;
  std::string name_;  // the latest entry reported, raw
  std::mutex draw_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool counted_ = false;  // the counting run has returned
  const std::atomic<bool>* cancel_ = nullptr;
  std::size_t shown_ = 0;  // columns of the line on screen
  bool drawn_ = false;     // a line was drawn
  std::thread counter_, drawer_;
};

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_PROGRESS_HPP
