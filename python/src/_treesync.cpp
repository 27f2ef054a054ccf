// python/src/_treesync.cpp - the `treesync._treesync` extension: one treesync::sync() call with
// run-time policies, the GIL released while it runs.  The Python layer (treesync/__init__.py)
// turns keywords into the option dict read here and the returned tuples into Report objects.
//
// Threads: the run goes to a std::thread; the calling thread waits for it with the GIL released
// and wakes every `tick` to take the GIL, call PyErr_CheckSignals() (Ctrl-C: the run's cancel flag
// is set, the run stops, KeyboardInterrupt is raised after it) and the progress callback.  Every
// Python callback is called with callback_mu held, then the GIL: one at a time, in one lock order.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../../examples/cli/refusal.hpp"
#include "../../examples/cli/options.hpp"  // the CLI's option table: its Python keyword column  // the refusal words the CLI says, with Python's names
#include <treesync/treesync.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace py = pybind11;

namespace {

// ---- sync_tree's excludes: Python's fnmatch on the last name --------------------------------------
// Names are compared as Python compares the str os.fsdecode() gives: one character per UTF-8 code
// point, one per byte that is not well-formed UTF-8 (surrogateescape); `*` any run, `?` one
// character, `[seq]` / `[!seq]` classes with ranges (an empty range matches nothing), a `[`
// without its `]` a literal; no backslash escapes (fnmatch.translate has none).
std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = n != 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // overlong forms, surrogates and values past U+10FFFF are not well-formed either
    if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
               (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
      ok = false;
    if (!ok) {
      out.push_back(0xdc00 + c);
      ++i;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

struct name_pattern {
  std::u32string pat;

  // [lo, hi] ranges and the negation of the class starting at pat[at] ('['); `end` the index
  // after its ']', or npos when there is none (then '[' is a literal).
  bool class_matches(std::size_t at, char32_t c, std::size_t& end) const {
    std::size_t j = at + 1;
    bool negate = false;
    if (j < pat.size() && pat[j] == U'!') {
      negate = true;
      ++j;
    }
    if (j < pat.size() && pat[j] == U']') ++j;  // a ']' first is a member
    while (j < pat.size() && pat[j] != U']') ++j;
    if (j >= pat.size()) {
      end = std::u32string::npos;
      return false;
    }
    end = j + 1;
    std::size_t k = at + 1 + (negate ? 1 : 0);
    bool hit = false;
    while (k < j) {
      if (k + 2 < j && pat[k + 1] == U'-') {
        if (pat[k] <= c && c <= pat[k + 2]) hit = true;
        k += 3;
      } else {
        if (pat[k] == c) hit = true;
        ++k;
      }
    }
    return hit != negate;
  }

  bool matches(const std::u32string& s) const { return match(0, s, 0); }

  bool match(std::size_t p, const std::u32string& s, std::size_t i) const {
    while (p < pat.size()) {
      const char32_t c = pat[p];
      if (c == U'*') {
        while (p < pat.size() && pat[p] == U'*') ++p;
        if (p == pat.size()) return true;
        for (std::size_t k = i; k <= s.size(); ++k)
          if (match(p, s, k)) return true;
        return false;
      }
      if (i == s.size()) return false;
      if (c == U'?') {
        ++p;
        ++i;
        continue;
      }
      if (c == U'[') {
        std::size_t end = 0;
        const bool hit = class_matches(p, s[i], end);
        if (end != std::u32string::npos) {
          if (!hit) return false;
          p = end;
          ++i;
          continue;
        }
      }
      if (c != s[i]) return false;
      ++p;
      ++i;
    }
    return i == s.size();
  }
};

// ---- run-time policies (one sync() instantiation) ------------------------------------------------
using compare_mode = treesync::compare::kind;  // the library's built-ins, chosen at run time
using links_mode = treesync::links::kind;
using deletion_mode = treesync::deletion::kind;
using py_compare = treesync::compare::chosen;
using py_deletion = treesync::deletion::chosen;
using py_links = treesync::links::chosen;

/// rsync filter rules (exclude=, include=, filter=) and sync_tree's bare-name patterns.
struct py_exclude {
  const treesync::filter* rules = nullptr;  // null: none
  const std::vector<name_pattern>* names = nullptr;
  const char* state_key() const { return "filter"; }  // as treesync::filter's
  bool excluded(std::string_view rel, treesync::file_type t) const {
    if (names && !names->empty()) {
      const std::size_t slash = rel.rfind('/');
      const std::u32string name = decode(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
      for (const auto& p : *names)
        if (p.matches(name)) return true;
    }
    return rules && rules->excluded(rel, t);
  }
};

// ---- the run and its watcher ---------------------------------------------------------------------
struct run_shared {
  std::mutex callback_mu;                  // held around every Python callback (then the GIL)
  std::atomic<bool> cancel{false};         // the library's cancel_on flag
  std::exception_ptr callback_error;       // the first exception a callback raised (then: cancel)
  py::object on_action;                    // None or callable(tuple)
  std::atomic<std::uint64_t> actions{0};   // for progress
  std::atomic<std::uint64_t> bytes{0};
};

std::string error_message(const std::error_code& ec) { return ec.message(); }

py::tuple entry_tuple(const treesync::entry_error& e) {
  const auto cond = e.code.default_error_condition();
  py::object err = py::none();
  if (cond.category() == std::generic_category() && cond.value() != 0) err = py::int_(cond.value());
  return py::make_tuple(py::bytes(e.path), treesync::to_string(e.operation), treesync::to_string(e.side),
                        err, e.code.value(), e.code.category().name(), error_message(e.code), e.detail);
}

py::list entry_list(const std::vector<treesync::entry_error>& v) {
  py::list out;
  for (const auto& e : v) out.append(entry_tuple(e));
  return out;
}

struct py_observer {
  run_shared* shared;
  void operator()(const treesync::action& a) const {
    shared->actions.fetch_add(1, std::memory_order_relaxed);
    if ((a.kind == treesync::action_kind::create || a.kind == treesync::action_kind::update) &&
        a.type == treesync::file_type::regular)
      shared->bytes.fetch_add(a.src_size, std::memory_order_relaxed);
    if (!shared->on_action) return;
    std::lock_guard<std::mutex> lock(shared->callback_mu);
    if (shared->callback_error) return;
    py::gil_scoped_acquire gil;
    try {
      py::list changes;
      if (treesync::has(a.changes, treesync::changed::size)) changes.append("size");
      if (treesync::has(a.changes, treesync::changed::mtime)) changes.append("mtime");
      if (treesync::has(a.changes, treesync::changed::mode)) changes.append("mode");
      const auto cond = a.code.default_error_condition();
      py::object err = py::none();
      if (cond.category() == std::generic_category() && cond.value() != 0) err = py::int_(cond.value());
      py::object message = a.code ? py::object(py::str(error_message(a.code))) : py::object(py::none());
      shared->on_action(py::make_tuple(treesync::to_string(a.kind), treesync::to_string(a.type),
                                       py::bytes(a.path.data(), a.path.size()), a.src_size, a.dst_size, err,
                                       message, changes, treesync::to_string(a.method), a.sparse));
    } catch (py::error_already_set&) {
      shared->callback_error = std::current_exception();
      shared->cancel.store(true);
    }
  }
};

// A path or pattern with a NUL would name less than it says (a path stops at it): refused as
// Python's os functions refuse one (the Python layer checks first; this holds for direct calls).
std::string no_nul(std::string s) {
  if (s.find('\0') != std::string::npos) throw py::value_error("embedded null byte");
  return s;
}

std::string bytes_arg(const py::dict& o, const char* key) {
  if (!o.contains(key) || o[key].is_none()) return {};
  return no_nul(o[key].cast<std::string>());  // bytes (the Python layer encodes with os.fsencode)
}

template <class T>
T get(const py::dict& o, const char* key, T fallback) {
  return o.contains(key) && !o[key].is_none() ? o[key].cast<T>() : fallback;
}

/// The walk of an operator-named path (issue 45 item 5): what the run then uses is what the check
/// was made on.  `mode`: 0 a file to read (O_RDONLY), 1 the destination under the CLI's rule
/// (treesync::open_trusted_dir: a missing one's parent kept), 2 the destination with no link as
/// its last component whoever owns it (sync_tree's rmtree rule; links above it followed), 3 a
/// check only (O_PATH, closed).  Returns (fd, parent fd, leaf, untrusted link or None, its owner,
/// errno, last component is a link (mode 1: a link to nothing)): the caller closes the descriptors
/// (>= 0).
py::tuple walk(const std::string& path, int mode) {
  treesync::trusted_open_result r;
  bool final_link = false;
  if (mode == 0) {
    r = treesync::open_trusted(no_nul(path), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } else if (mode == 1) {
    r = treesync::open_trusted_dir(no_nul(path));
    final_link = r.dangling;  // (a link to nothing: left to the run, which refuses it)
  } else if (mode == 3) {
    (void)treesync::meets_untrusted_symlink(no_nul(path), r);
  } else {
    std::string p = no_nul(path);
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const std::size_t slash = p.rfind('/');
    const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    r.leaf = slash == std::string::npos ? p : p.substr(slash + 1);
    r.parent = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r.parent < 0) {
      r.error = errno;
      r.leaf.clear();
    } else if (r.leaf == "." || r.leaf == ".." || r.leaf == "/") {  // no name of its own: as the path says
      ::close(r.parent);
      r.parent = -1;
      r.leaf.clear();
      r.fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (r.fd < 0) r.error = errno;
    } else {
      r.fd = ::openat(r.parent, r.leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (r.fd >= 0) {
        ::close(r.parent);
        r.parent = -1;
      } else {
        r.error = errno;
        struct stat st;
        const bool exists = ::fstatat(r.parent, r.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
        // ELOOP: a link at the open, whatever the fstatat found there since (an exchange between
        // the two): refused as a link, never left to a run by path that would follow it
        final_link = r.error == ELOOP || (exists && S_ISLNK(st.st_mode));
        if (exists || final_link) {  // a link (refused by the caller) or not a directory (the caller
                                     // refuses the run with this errno: pin_unreachable)
          ::close(r.parent);
          r.parent = -1;
        }
      }
    }
  }
  return py::make_tuple(r.fd, r.parent, py::bytes(r.leaf),
                        r.refused() ? py::object(py::bytes(r.untrusted)) : py::object(py::none()),
                        static_cast<long>(r.owner), r.error, final_link);
}

/// The whole run: returns (report tuple, ec value, ec category, ec message, planned deletions or None,
/// the refusal's words: (message, path at fault) or None).
/// "dst_fd" / "dst_parent_fd": the destination as walk() reached it (pinned: the run works there).
/// The library's options for the keywords `o` (sync()'s, as __init__.py passes them).
treesync::options library_options(const py::dict& o) {
  treesync::options lib;
  // the library's switch table: each switch is the keyword of its member's name
#define TREESYNC_PY_FLAG(member, tag, state, cli, help) lib.member = get<bool>(o, #member, false);
  TREESYNC_FLAGS(TREESYNC_PY_FLAG)
#undef TREESYNC_PY_FLAG
#define TREESYNC_PY_VALUE(member, type, def, tag, state, cli, help) lib.member = get<type>(o, #member, def);
  TREESYNC_VALUES(TREESYNC_PY_VALUE)
#undef TREESYNC_PY_VALUE
  lib.write = get<bool>(o, "inplace", false) ? treesync::write_mode::in_place : treesync::write_mode::atomic;
  lib.errors = get<bool>(o, "stop_on_error", false) ? treesync::error_mode::stop : treesync::error_mode::collect;
  lib.jobs = get<unsigned>(o, "jobs", 0);
  lib.existing = get<bool>(o, "existing", false);
  lib.ignore_existing = get<bool>(o, "ignore_existing", false);
  lib.backup_dir = bytes_arg(o, "backup_dir");
  lib.temp_dir = bytes_arg(o, "temp_dir");
  lib.state = bytes_arg(o, "state");
  if (o.contains("state_memory") && !o["state_memory"].is_none())
    lib.state_memory = o["state_memory"].cast<std::uint64_t>();
  lib.verify = static_cast<treesync::verify_level>(get<int>(o, "verify", 0));
  return lib;
}

/// The words of the library's refusal (treesync::option_rules) that the keywords `o` break, each
/// option named by its keyword; None when they break none.
py::object refused(const py::dict& o) {
  const treesync::option_rule* rule = treesync::refused_combination(library_options(o));
  if (!rule) return py::none();
  return py::str(treesync::option_rule_text(*rule, [](const char* key) { return key; }));
}

py::tuple run(const py::dict& o) {
  const std::string src = bytes_arg(o, "src"), dst = bytes_arg(o, "dst");
  treesync::options lib = library_options(o);
  const py_compare compare{static_cast<compare_mode>(get<int>(o, "compare", 0)),
                           std::chrono::nanoseconds(get<std::int64_t>(o, "modify_window_ns", 0))};
  const std::int64_t max_delete = get<std::int64_t>(o, "max_delete", -1);
  const py_deletion deletion{static_cast<deletion_mode>(get<int>(o, "deletion", 0)),
                             max_delete < 0 ? treesync::unlimited : static_cast<std::size_t>(max_delete)};
  const py_links links{static_cast<links_mode>(get<int>(o, "links", 0))};

  // filter rules, in order: (kind, text) with kind 0 exclude, 1 include, 2 rule, 3 exclude-from
  // text, 4 include-from text
  treesync::filter rules = treesync::filter::reading(src);
  bool have_rules = false;
  for (const auto& item : get<py::list>(o, "rules", py::list())) {
    const auto t = item.cast<py::tuple>();
    const int kind = t[0].cast<int>();
    const std::string text = kind < 3 ? no_nul(t[1].cast<std::string>()) : t[1].cast<std::string>();
    have_rules = true;
    if (kind == 0) rules.add_plain(text, false);
    else if (kind == 1) rules.add_plain(text, true);
    else if (kind == 2) {
      if (!rules.add_rule(text)) throw py::value_error("filter: not a rule treesync knows: " + text +
                                                        " (use '+ PATTERN', '- PATTERN', 'dir-merge NAME' or '!')");
    } else rules.add_rules(text, kind == 4);
  }
  std::vector<name_pattern> names;
  for (const auto& item : get<py::list>(o, "name_excludes", py::list()))
    names.push_back(name_pattern{decode(no_nul(item.cast<std::string>()))});

  run_shared shared;
  py::object on_action = o.contains("on_action") ? py::object(o["on_action"]) : py::object(py::none());
  if (!on_action.is_none()) shared.on_action = on_action;
  py::object progress = o.contains("progress") ? py::object(o["progress"]) : py::object(py::none());
  py::object cancel_event = o.contains("cancel") ? py::object(o["cancel"]) : py::object(py::none());
  const double tick_s = get<double>(o, "tick", 0.02);
  const double progress_s = get<double>(o, "progress_interval", 0.1);
  const bool check_signals = get<bool>(o, "check_signals", true);
  const int dst_fd = get<int>(o, "dst_fd", -1), dst_parent_fd = get<int>(o, "dst_parent_fd", -1);
  const int dst_error = get<int>(o, "dst_error", 0);  // the walk could not reach dst: refused for that
  lib.cancel = &shared.cancel;

  // the run (on its own thread) and its outcome
  treesync::report rep;
  std::error_code ec;
  std::size_t planned = 0;
  bool have_planned = false;
  std::exception_ptr run_error;
  bool done = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::exception_ptr interrupt;  // KeyboardInterrupt (or another signal handler's exception)

  const py_exclude exclude{have_rules ? &rules : nullptr, &names};
  const auto body = [&] {
    try {
      py_observer obs{&shared};
      treesync::posix_fs fs;
      if (dst_fd >= 0)
        fs.pin_root(std::filesystem::path(dst), dst_fd);
      else if (dst_parent_fd >= 0)
        fs.pin_missing_root(std::filesystem::path(dst), dst_parent_fd);
      else if (dst_error)
        fs.pin_unreachable(std::filesystem::path(dst), dst_error);
      rep = treesync::sync(fs, std::filesystem::path(src), std::filesystem::path(dst), lib, compare, deletion, links,
                           exclude, obs, ec);
      if (ec == treesync::errc::max_delete_exceeded) {  // the run counted them (none was made)
        planned = rep.would_delete;
        have_planned = true;
      }
    } catch (...) {
      run_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(done_mu);
    done = true;
    done_cv.notify_all();
  };

  const auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  const auto call_progress = [&](bool final_call) {  // with callback_mu and the GIL held
    if (progress.is_none() || shared.callback_error) return;
    try {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress(py::make_tuple(shared.actions.load(), shared.bytes.load(), elapsed, final_call));
    } catch (py::error_already_set&) {
      shared.callback_error = std::current_exception();
      shared.cancel.store(true);
    }
  };
  {
    py::gil_scoped_release release;
    std::thread worker(body);
    const auto tick = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(tick_s));
    std::unique_lock<std::mutex> lock(done_mu);
    while (!done) {
      if (done_cv.wait_for(lock, tick, [&] { return done; })) break;
      lock.unlock();
      {
        std::lock_guard<std::mutex> cb(shared.callback_mu);
        py::gil_scoped_acquire gil;
        if (check_signals && !interrupt && PyErr_CheckSignals() != 0) {
          interrupt = std::make_exception_ptr(py::error_already_set());
          shared.cancel.store(true);
        }
        if (!cancel_event.is_none() && !shared.cancel.load()) {
          try {
            if (cancel_event.attr("is_set")().cast<bool>()) shared.cancel.store(true);
          } catch (py::error_already_set&) {
            if (!shared.callback_error) shared.callback_error = std::current_exception();
            shared.cancel.store(true);
          }
        }
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_progress).count() >= progress_s) {
          last_progress = now;
          call_progress(false);
        }
      }
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (interrupt) std::rethrow_exception(interrupt);
  if (shared.callback_error) std::rethrow_exception(shared.callback_error);
  if (run_error) std::rethrow_exception(run_error);
  {
    std::lock_guard<std::mutex> cb(shared.callback_mu);
    call_progress(true);
  }
  if (shared.callback_error) std::rethrow_exception(shared.callback_error);

  py::dict counts;
  counts["scanned"] = rep.scanned;
  counts["created"] = rep.created;
  counts["updated"] = rep.updated;
  counts["meta_updated"] = rep.meta_updated;
  counts["deleted"] = rep.deleted;
  counts["excluded"] = rep.excluded;
  counts["skipped"] = rep.skipped;
  counts["cleaned"] = rep.cleaned;
  counts["settled"] = rep.settled;
  counts["bytes_copied"] = rep.bytes_copied;
  py::dict report;
  report["counts"] = counts;
  report["errors"] = entry_list(rep.errors);
  report["vanished"] = entry_list(rep.vanished);
  report["skipped_entries"] = entry_list(rep.skipped_entries);
  report["notices"] = entry_list(rep.notices);
  report["elapsed"] = std::chrono::duration<double>(rep.elapsed).count();
  report["cancelled"] = rep.cancelled;

  py::object ec_errno = py::none();
  const auto cond = ec.default_error_condition();
  if (ec && cond.category() == std::generic_category()) ec_errno = py::int_(cond.value());
  py::object planned_obj = have_planned ? py::object(py::int_(planned)) : py::object(py::none());
  // (message, path at fault, refused by the library's own rule) of a run that failed as a whole:
  // the CLI's words and kind (examples/cli/refusal.hpp)
  py::object words = py::none();
  if (ec) {
    treesync_cli::refusal_facts facts{src, dst, std::nullopt, planned, std::nullopt, std::nullopt};
    if (max_delete >= 0) facts.max_delete = static_cast<std::size_t>(max_delete);
    if (!lib.state.empty()) facts.state = lib.state.string();
    if (!lib.temp_dir.empty()) facts.temp_dir = lib.temp_dir.string();
    const treesync_cli::refusal_text t = treesync_cli::describe_refusal(facts, ec, treesync_cli::spelling::python);
    words = py::make_tuple(t.message, py::bytes(t.path), treesync_cli::classify_refusal(ec).by_rule);
  }
  return py::make_tuple(report, ec.value(), ec ? ec.category().name() : "", ec ? error_message(ec) : std::string(),
                        ec_errno, planned_obj, words);
}

}  // namespace

PYBIND11_MODULE(_treesync, m) {
  m.doc() = "treesync's C++ core (use the `treesync` package)";
  m.attr("version") = TREESYNC_VERSION_STRING;
  m.def("run", &run, py::arg("options"),
        "Runs one sync from the option dict built by treesync.sync() (the GIL is released while it runs).");
  m.def("refused", &refused, py::arg("options"),
        "The words of the library's refusal the option dict breaks (treesync::option_rules), or None.");
  m.def("walk", &walk, py::arg("path"), py::arg("mode"),
        "Walks an operator-named path under the untrusted-symlink rule and keeps what it reached open.");
  m.def(
      "fnmatch",
      [](const std::string& name, const std::string& pattern) {
        return name_pattern{decode(pattern)}.matches(decode(name));
      },
      py::arg("name"), py::arg("pattern"), "sync_tree's name matching (bytes, bytes): fnmatch.fnmatchcase's rules.");
  // treesync::errc values, by name (every code), for the Python layer's messages and its callers
  py::dict errc;
  errc["same_directory"] = static_cast<int>(treesync::errc::same_directory);
  errc["nested_directory"] = static_cast<int>(treesync::errc::nested_directory);
  errc["empty_source"] = static_cast<int>(treesync::errc::empty_source);
  errc["max_delete_exceeded"] = static_cast<int>(treesync::errc::max_delete_exceeded);
  errc["symlink_cycle"] = static_cast<int>(treesync::errc::symlink_cycle);
  errc["dangling_symlink"] = static_cast<int>(treesync::errc::dangling_symlink);
  errc["vanished"] = static_cast<int>(treesync::errc::vanished);
  errc["source_missing"] = static_cast<int>(treesync::errc::source_missing);
  errc["destination_parent_missing"] = static_cast<int>(treesync::errc::destination_parent_missing);
  errc["destination_dangling_symlink"] = static_cast<int>(treesync::errc::destination_dangling_symlink);
  errc["state_not_regular"] = static_cast<int>(treesync::errc::state_not_regular);
  errc["state_dir_missing"] = static_cast<int>(treesync::errc::state_dir_missing);
  errc["state_not_kept"] = static_cast<int>(treesync::errc::state_not_kept);
  errc["skipped_symlink"] = static_cast<int>(treesync::errc::skipped_symlink);
  errc["deletions_skipped"] = static_cast<int>(treesync::errc::deletions_skipped);
  errc["unsupported"] = static_cast<int>(treesync::errc::unsupported);
  errc["special_file"] = static_cast<int>(treesync::errc::special_file);
  errc["changed_during_copy"] = static_cast<int>(treesync::errc::changed_during_copy);
  errc["other_filesystem"] = static_cast<int>(treesync::errc::other_filesystem);
  errc["case_collision"] = static_cast<int>(treesync::errc::case_collision);
  errc["unsafe_backup_dir"] = static_cast<int>(treesync::errc::unsafe_backup_dir);
  errc["state_ignored"] = static_cast<int>(treesync::errc::state_ignored);
  errc["state_entries_gone"] = static_cast<int>(treesync::errc::state_entries_gone);
  errc["directory_changed"] = static_cast<int>(treesync::errc::directory_changed);
  errc["inplace_with_backup"] = static_cast<int>(treesync::errc::inplace_with_backup);
  errc["state_with_hard_links"] = static_cast<int>(treesync::errc::state_with_hard_links);
  errc["state_with_backup_dir"] = static_cast<int>(treesync::errc::state_with_backup_dir);
  errc["verify_without_state"] = static_cast<int>(treesync::errc::verify_without_state);
  errc["unsafe_temp_dir"] = static_cast<int>(treesync::errc::unsafe_temp_dir);
  errc["temp_dir_missing"] = static_cast<int>(treesync::errc::temp_dir_missing);
  // the library's switch table (treesync::switch_table): (keyword, CLI spellings, help, takes a value);
  // each is a keyword of sync() (python/treesync/__init__.py reads them from here)
  py::list switches;
  for (const auto& row : treesync::switch_table) switches.append(py::make_tuple(row.member, row.cli, row.help, row.value));
  m.attr("switches") = switches;
  // the CLI's own options (examples/cli/options.hpp cli_options()): (spellings, Python keyword or
  // "KEYWORD=VALUE", "" for none), for the test that walks them against sync()'s keywords
  py::list cli_rows;
  for (const auto& row : treesync_cli::cli_options())
    if (row.cli && row.on) cli_rows.append(py::make_tuple(row.cli, row.py));
  m.attr("cli_options") = cli_rows;
  // the options refused together: (code, first keyword, second keyword, needs, why)
  py::list rules;
  for (const auto& r : treesync::option_rules)
    rules.append(py::make_tuple(static_cast<int>(r.code), r.first, r.second, r.needs, r.why));
  m.attr("option_rules") = rules;
  m.attr("errc") = errc;
  m.attr("category") = treesync::error_category().name();
  // a rule file that cannot be read or parsed (dir-merge): the Python layer makes it a treesync.Error
  py::register_exception<treesync::filter_error>(m, "FilterError", PyExc_ValueError);
}
