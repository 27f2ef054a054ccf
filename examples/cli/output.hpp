// examples/cli/output.hpp - what the treesync tool prints: the observer (-i, -v, --progress's feed, the
// actions of --json), the summary line, --stats, the errors on stderr and the --json report.
// Part of the treesync example CLI (examples/treesync.cpp; the JSON schema is documented there).
#ifndef TREESYNC_CLI_OUTPUT_HPP
#define TREESYNC_CLI_OUTPUT_HPP

#include "options.hpp"
#include "progress.hpp"
#include "text.hpp"

#include <treesync/treesync.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

inline char type_letter(treesync::file_type t) {
  switch (t) {
    case treesync::file_type::regular: return 'f';
    case treesync::file_type::directory: return 'd';
    case treesync::file_type::symlink: return 'L';
    case treesync::file_type::block:
    case treesync::file_type::character: return 'D';
    case treesync::file_type::fifo:
    case treesync::file_type::socket: return 'S';
    default: return '?';
  }
}

/// rsync's 11-character itemize code (YXcstpoguax) of an action, or "" for the kinds rsync does not
/// itemize (skip, error, vanished).  `checksum` says the run compares content (-c): an updated file
/// then differs by content ('c'), whatever its size.  `ignore_times` says it rewrote files without
/// comparing them (-I): an updated file whose size and time matched is then not known to differ
/// (>f........., as rsync), where otherwise only a content check could have found it changed.
namespace detail {

/// rsync's code of something new: X's letter (code[0]), then '+' in every other column.
inline std::string itemize_new(std::string code, char x) {
  code[0] = x;
  for (std::size_t k = 2; k < code.size(); ++k) code[k] = '+';
  return code;
}

/// The columns s, t, p, o, g of what `changes` holds.
inline std::string itemize_changes(std::string code, treesync::changed changes) {
  using treesync::changed;
  const std::pair<changed, std::size_t> columns[] = {
      {changed::size, 3}, {changed::mtime, 4}, {changed::mode, 5}, {changed::owner, 6}, {changed::group, 7}};
  static const char letters[] = "...stpog";
  for (const auto& [what, column] : columns)
    if (treesync::any(changes & what)) code[column] = letters[column];
  return code;
}

}  // namespace detail

inline std::string itemize_code(const treesync::action& a, bool checksum, bool ignore_times = false) {
  using treesync::action_kind;
  using treesync::changed;
  using treesync::file_type;
  std::string code(11, '.');
  code[1] = type_letter(a.type);
  const char made = a.type == file_type::regular ? '>' : 'c';
  if (treesync::any(a.changes & changed::linked)) {  // -H: hf+++++++++ NAME => FIRST
    if (a.kind == action_kind::create || treesync::any(a.changes & changed::replaced))
      return detail::itemize_new(code, 'h');
    // a file that was there: what it had that differs from FIRST (hf.st...... NAME => FIRST); as
    // rsync, all spaces when nothing does (hf          NAME => FIRST)
    code[0] = 'h';
    code = detail::itemize_changes(code, a.changes);
    if (code.find_first_not_of('.', 2) == std::string::npos)
      for (std::size_t k = 2; k < code.size(); ++k) code[k] = ' ';
    return code;
  }
  // an entry of another type replaced: rsync itemizes it as new (>f+++++++++, cL+++++++++)
  if (a.kind == action_kind::update && treesync::any(a.changes & changed::replaced)) return detail::itemize_new(code, made);
  switch (a.kind) {
    case action_kind::remove: return "*deleting  ";
    case action_kind::create: return detail::itemize_new(code, made);
    case action_kind::update:
      // an entry of another type replaced by a directory
      if (a.type == file_type::directory) return detail::itemize_new(code, 'c');
      if (a.type == file_type::symlink) {  // 'c': the link's target changed; 't': its mtime
        code[0] = 'c';
        code[2] = 'c';
        return detail::itemize_changes(code, a.changes & (changed::mtime | changed::owner | changed::group));
      }
      code[0] = '>';
      // -c: a file rewritten has other content whatever its size (rsync prints 'c' then too)
      if (checksum || (!ignore_times && !treesync::any(a.changes & changed::size) &&
                       !treesync::any(a.changes & changed::mtime)))
        code[2] = 'c';
      break;
    case action_kind::update_meta: break;
    case action_kind::skip:
    case action_kind::error:
    case action_kind::vanished: return {};
  }
  return detail::itemize_changes(code, a.changes);
}

/// -v's word for an action
inline const char* verbose_label(treesync::action_kind k) {
  switch (k) {
    case treesync::action_kind::create: return "create  ";
    case treesync::action_kind::update: return "update  ";
    case treesync::action_kind::update_meta: return "meta    ";
    case treesync::action_kind::remove: return "delete  ";
    case treesync::action_kind::skip: return "skip    ";
    case treesync::action_kind::error: return "error   ";
    case treesync::action_kind::vanished: return "vanished";
  }
  return "?";
}

/// The path of an action for a terminal as rsync prints it: escaped, '/' after a directory; the root
/// is "." (SRC/ into DST), or NAME for SRC without a trailing slash, whose entries are NAME/path.
inline std::string shown_path(const treesync::action& a, const std::string& name = {}) {
  std::string p = name.empty() ? (a.path.empty() ? std::string(".") : display(a.path))
                               : display(a.path.empty() ? name : name + '/' + std::string(a.path));
  if (a.type == treesync::file_type::directory) p += '/';
  return p;
}

// ---- the order of the output ----------------------------------------------------------------------
//
// The engine's workers report actions in whatever order they finish, so -i, -v and the actions of
// --json are kept until the end of the run and printed in one order whatever -j is: rsync's order
// (a depth-first walk in which each directory's own line comes first, then the deletions in it,
// then its other entries by name, then its sub-directories by name, each followed by its
// contents).  Deletions go as rsync's --delete-during does them: in a directory, its
// sub-directories then its other entries, each in reverse name order, and the contents of a deleted
// directory before the directory itself.  Names compare bytewise.
//
// sort_key() encodes that order as a string that compares bytewise.  Per path component: a group
// byte (1 deletion, 2 not a directory, 3 directory, 9 after the contents of a deleted directory),
// a byte that puts directories before other entries among deletions, then the name and a
// terminator: '/' after a directory's name (rsync sorts "a-b/" before "a/" before "a0/"), '\0'
// after another entry's.  Names hold neither NUL nor '/', so the terminator ends the name.  For
// the descending order of deletions, name and terminator are written with every byte complemented.

namespace order_detail {
inline void add_component(std::string& key, char group, bool dir, std::string_view name) {
  key += group;
  const bool descending = group == '\1';
  key += dir ? '\0' : '\1';
  for (char c : name)
    key += descending ? static_cast<char>(~static_cast<unsigned char>(c)) : c;
  const char end = dir ? '/' : '\0';  // rsync compares a directory's name as if followed by '/'
  key += descending ? static_cast<char>(~static_cast<unsigned char>(end)) : end;
}
}  // namespace order_detail

/// What sort_key() needs to know of an ancestor directory of a deleted entry.
enum class ancestor { kept, deleted, replaced };

/// The sort key of the entry at `path` (relative, '/'-separated; "" is the root).  `removed`: the
/// entry is deleted; `dir`: it is (or, deleted, was) a directory.  `of(prefix)` tells whether the
/// ancestor directory at `prefix` of a deleted entry is deleted too (the entry is then among the
/// deletions of the first such ancestor's parent) or replaced by an entry of another type (the
/// entry is then deleted just before that entry is written, as rsync does).
template <class Ancestor>
std::string sort_key(std::string_view path, bool removed, bool dir, const Ancestor& of) {
  std::string key;
  if (path.empty()) return key;  // the root comes first
  bool deleting = false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    const bool last = slash == std::string_view::npos;
    const std::string_view name = path.substr(start, last ? std::string_view::npos : slash - start);
    if (last) {
      if (removed) {
        order_detail::add_component(key, '\1', dir, name);
        if (dir) key += '\x09';
      } else {
        order_detail::add_component(key, dir ? '\3' : '\2', dir, name);
        if (!dir) key += '\x09';  // after the deletions under a directory it replaced
      }
      return key;
    }
    const ancestor a = removed && !deleting ? of(path.substr(0, slash)) : ancestor::kept;
    if (a == ancestor::replaced)
      order_detail::add_component(key, '\2', false, name);
    else
      order_detail::add_component(key, deleting || a == ancestor::deleted ? '\1' : '\3', true, name);
    if (a != ancestor::kept) deleting = true;
    start = slash + 1;
  }
}

/// The entries of report::errors (vanished, skipped, notices) in the order of the output: by path
/// as above, then by operation and error code.
inline void sort_entries(std::vector<treesync::entry_error>& v) {
  const auto none = [](std::string_view) { return ancestor::kept; };
  std::vector<std::pair<std::string, treesync::entry_error>> keyed;
  keyed.reserve(v.size());
  for (auto& e : v) {
    std::string key = sort_key(e.path, false, false, none);
    keyed.emplace_back(std::move(key), std::move(e));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    const std::string_view ao = treesync::to_string(a.second.operation), bo = treesync::to_string(b.second.operation);
    if (ao != bo) return ao < bo;
    return a.second.code.value() < b.second.code.value();
  });
  v.clear();
  for (auto& k : keyed) v.push_back(std::move(k.second));
}

inline void sort_entries(treesync::report& r) {
  sort_entries(r.errors);
  sort_entries(r.vanished);
  sort_entries(r.skipped_entries);
  sort_entries(r.notices);
}

/// The target of the symlink at `root`/`rel`, or false.
inline bool link_target(const std::string& root, std::string_view rel, std::string& out) {
  const std::string name = rel.empty() ? root : root + '/' + std::string(rel);
  struct stat st;
  if (::lstat(name.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return false;
  std::string buf(st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : 256, '\0');
  for (;;) {
    const ssize_t n = ::readlink(name.c_str(), &buf[0], buf.size());
    if (n < 0) return false;
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      out = std::move(buf);
      return true;
    }
    buf.resize(buf.size() * 2);  // the link grew since lstat
  }
}

/// The observer passed to treesync::sync().  The engine calls it under its own mutex, one action
/// at a time, whatever the number of workers.  --progress's meter (progress.hpp) is fed as the
/// actions arrive; -i, -v and the actions of --json are kept (one small record per action) and
/// printed by finish() in the order described above, so an interrupted run still prints, in
/// order, what was done.
class printer {
 public:
  /// What the printer is for: the run itself, or the counting run of --progress (which only
  /// feeds the meter's totals).
  enum class role { run, count };

  /// `meter`: --progress's meter (fed with the actions), or null.
  explicit printer(const options& opt, progress_meter* meter = nullptr, role r = role::run)
      : opt_(opt), meter_(meter), role_(r) {}

  void operator()(const treesync::action& a) {
    if (role_ == role::count) {
      if (meter_) meter_->on_counted(a);
      return;
    }
    if (meter_) meter_->on_action(a);
    if (opt_.itemize || opt_.verbose)
      kept_.push_back(record{std::string(a.path), a.kind, a.type, a.changes, a.src_size, a.dst_size, a.code,
                             a.method, a.sparse, {}, std::string(a.link_to)});
  }

  /// The meter the comparison tells of the files it finds current, or null.
  progress_meter* current_files_meter() const noexcept {
    return role_ == role::run && meter_ && meter_->counting_current() ? meter_ : nullptr;
  }

  /// After the run (and after the meter's last line): the kept actions in order, as -i or -v
  /// lines or, with --json, for json_actions().  A symlink written (or, under --dry-run, to be
  /// written) is shown as `name -> target`, the target read from the destination after the run
  /// (from the source under --dry-run, or when the destination's link is gone).
  void finish() {
    order();
    const bool checksum = opt_.compare == compare_mode::checksum;
    const bool ignore_times = opt_.ignore_times || opt_.compare == compare_mode::always;  // -I (parse() settled it)
    std::size_t removals = 0;
    for (const record& k : kept_) {
      if (k.kind == treesync::action_kind::remove && removals++ >= max_removals_) continue;
      const treesync::action a = k.as_action();
      std::string target;
      const bool link = a.type == treesync::file_type::symlink &&
                        (a.kind == treesync::action_kind::create || a.kind == treesync::action_kind::update ||
                         a.kind == treesync::action_kind::update_meta) &&
                        ((!opt_.lib.dry_run && link_target(opt_.dst_root, a.path, target)) ||
                         link_target(opt_.src_root, a.path, target));
      if (opt_.json) {
        actions_.push_back(json_action(a, checksum, ignore_times, link ? &target : nullptr));
        continue;
      }
      std::string arrow = link ? " -> " + display(target) : std::string();
      if (treesync::any(a.changes & treesync::changed::linked))  // rsync: hf+++++++++ NAME => FIRST
        arrow = " => " + display(opt_.name.empty() ? k.link_to : opt_.name + '/' + k.link_to);
      if (opt_.itemize) {
        const std::string code = itemize_code(a, checksum, ignore_times);
        if (!code.empty()) line(code + ' ' + shown_path(a, opt_.name) + arrow);
      } else if (a.kind != treesync::action_kind::error && a.kind != treesync::action_kind::vanished) {
        line(std::string(verbose_label(a.kind)) + ' ' + shown_path(a, opt_.name) + arrow);
      }
    }
    kept_.clear();
    kept_.shrink_to_fit();
    std::fflush(stdout);
  }

  const std::vector<std::string>& json_actions() const noexcept { return actions_; }

  /// -n --max-delete=N over the limit: finish() lists the first N deletions only (rsync's order).
  void limit_removals(std::size_t n) noexcept { max_removals_ = n; }

 private:
  struct record {
    std::string path;
    treesync::action_kind kind;
    treesync::file_type type;
    treesync::changed changes;
    std::uint64_t src_size, dst_size;
    std::error_code code;
    treesync::copy_method method;
    bool sparse;
    std::string key;  // sort_key(), filled by order()
    std::string link_to;  // changed::linked: the first name

    treesync::action as_action() const {
      treesync::action a{kind, type, path};
      a.src_size = src_size;
      a.dst_size = dst_size;
      a.code = code;
      a.changes = changes;
      a.method = method;
      a.sparse = sparse;
      a.link_to = link_to;
      return a;
    }
  };

  /// Sorts kept_ into the output order (see sort_key); equal paths by kind, then by type.
  void order() {
    using treesync::action_kind;
    using treesync::file_type;
    std::unordered_map<std::string_view, ancestor> gone;  // deleted directories, entries replaced
    for (const record& k : kept_) {
      if (k.kind == action_kind::remove && k.type == file_type::directory)
        gone.emplace(k.path, ancestor::deleted);
      else if ((k.kind == action_kind::create || k.kind == action_kind::update) && k.type != file_type::directory)
        gone[k.path] = ancestor::replaced;
    }
    const auto is_gone = [&gone](std::string_view prefix) {
      const auto it = gone.find(prefix);
      return it == gone.end() ? ancestor::kept : it->second;
    };
    for (record& k : kept_)
      k.key = sort_key(k.path, k.kind == action_kind::remove, k.type == file_type::directory, is_gone);
    std::sort(kept_.begin(), kept_.end(), [](const record& a, const record& b) {
      if (a.key != b.key) return a.key < b.key;
      if (a.kind != b.kind) return a.kind < b.kind;
      return a.type < b.type;
    });
  }

  void line(const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
  }

  static std::string json_action(const treesync::action& a, bool checksum, bool ignore_times,
                                 const std::string* target) {
    std::string s = "{\"kind\":" + json_string(treesync::to_string(a.kind));
    s += ",\"type\":" + json_string(treesync::to_string(a.type));
    s += ',' + json_path("path", a.path);
    if (target) s += ',' + json_path("target", *target);
    if (treesync::any(a.changes & treesync::changed::linked)) s += ',' + json_path("link_to", a.link_to);
    s += ",\"itemize\":";
    const std::string code = itemize_code(a, checksum, ignore_times);
    s += code.empty() ? std::string("null") : json_string(code);
    s += ",\"changes\":[";
    const char* sep = "";
    for (const auto& [bit, name] : {std::pair<treesync::changed, const char*>{treesync::changed::size, "size"},
                                    {treesync::changed::mtime, "mtime"},
                                    {treesync::changed::mode, "mode"},
                                    {treesync::changed::owner, "owner"},
                                    {treesync::changed::group, "group"}}) {
      if (treesync::any(a.changes & bit)) {
        s += sep;
        s += json_string(name);
        sep = ",";
      }
    }
    s += "],\"src_size\":" + std::to_string(a.src_size) + ",\"dst_size\":" + std::to_string(a.dst_size);
    s += ",\"method\":";
    s += a.method == treesync::copy_method::none ? std::string("null") : json_string(treesync::to_string(a.method));
    s += ",\"sparse\":" + std::string(a.sparse ? "true" : "false");
    s += ",\"message\":";
    s += a.code ? json_string(a.code.message()) : std::string("null");
    s += '}';
    return s;
  }

  const options& opt_;
  progress_meter* meter_;
  role role_;
  std::vector<record> kept_;           // -i, -v, --json: the actions, until finish()
  std::vector<std::string> actions_;  // --json: the kept actions, in order
  std::size_t max_removals_ = treesync::unlimited;
};

// ---- after the run --------------------------------------------------------------------------------

inline double seconds(const treesync::report& r) { return std::chrono::duration<double>(r.elapsed).count(); }
inline double rate(const treesync::report& r) {
  const double s = seconds(r);
  return s > 0 ? static_cast<double>(r.bytes_copied) / s : 0.0;
}

/// The default output: one line (`human`: -h, the bytes in units).
inline void print_summary(const treesync::report& r, bool dry, bool interrupted, bool human = false) {
  const std::string bytes = human ? human_bytes(static_cast<double>(r.bytes_copied))
                                  : std::to_string(r.bytes_copied) + " bytes";
  std::printf("%s%s%zu scanned, %zu created, %zu updated, %zu metadata, %zu deleted, %zu excluded, %zu skipped, "
              "%zu errors, %zu vanished; %s copied in %.3f s\n",
              interrupted ? "(interrupted) " : "", dry ? "(dry run) " : "", r.scanned, r.created, r.updated,
              r.meta_updated, r.deleted, r.excluded, r.skipped, r.errors.size(), r.vanished.size(), bytes.c_str(),
              seconds(r));
}

/// --stats
inline void print_stats(const treesync::report& r, bool dry, bool interrupted) {
  if (dry) std::printf("Dry run: nothing was changed\n");
  if (interrupted) std::printf("Interrupted: the counts cover the part that ran\n");
  std::printf("Entries scanned:     %zu\n", r.scanned);
  std::printf("Created:             %zu\n", r.created);
  std::printf("Updated:             %zu\n", r.updated);
  std::printf("Metadata updated:    %zu\n", r.meta_updated);
  std::printf("Deleted:             %zu\n", r.deleted);
  std::printf("Excluded:            %zu\n", r.excluded);
  std::printf("Skipped:             %zu\n", r.skipped);
  std::printf("Temporaries removed: %zu\n", r.cleaned);
  std::printf("Settled:             %zu\n", r.settled);
  std::printf("Errors:              %zu\n", r.errors.size());
  std::printf("Vanished:            %zu\n", r.vanished.size());
  std::printf("Bytes copied:        %llu (%s)\n", static_cast<unsigned long long>(r.bytes_copied),
              human_bytes(static_cast<double>(r.bytes_copied)).c_str());
  std::printf("Elapsed:             %.3f s\n", seconds(r));
  std::printf("Rate:                %s/s\n", human_bytes(rate(r)).c_str());
}

/// The roots as given on the command line, for naming an entry in full: the side's root joined
/// with the entry's relative path ("" is the root itself).
struct roots {
  std::string source;
  std::string destination;

  std::string full_path(const treesync::entry_error& e) const {
    if (e.operation == treesync::operation::state) return e.path;  // the state file, as given
    std::string root = e.side == treesync::side::source ? source : destination;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (e.path.empty()) return root;
    return root == "/" ? root + e.path : root + '/' + e.path;
  }
};

/// The entry's `detail` (what the library adds to the code's message, e.g. why a state file was
/// ignored), or "" for a library whose entry_error has none.
template <class E>
auto entry_detail(const E& e, int) -> decltype(std::string(e.detail)) {
  return e.detail;
}
template <class E>
std::string entry_detail(const E&, long) {
  return {};
}

/// Per-entry failures and vanished entries, as `treesync: OPERATION PATH (SIDE FULL-PATH): reason`
/// on stderr, e.g. `treesync: copy a/b (source /data/src/a/b): Permission denied`.
inline void print_errors(const treesync::report& r, const roots& at) {
  const auto where = [&at](const treesync::entry_error& e) {
    return std::string(treesync::to_string(e.side)) + ' ' + display(at.full_path(e));
  };
  for (const auto& e : r.errors) {
    if (e.operation == treesync::operation::state) {  // the state file's own path, not an entry of DST
      std::fprintf(stderr, "treesync: state file %s: %s\n", display(e.path).c_str(), e.code.message().c_str());
      continue;
    }
    std::fprintf(stderr, "treesync: %s %s (%s): %s\n", treesync::to_string(e.operation),
                 e.path.empty() ? "." : display(e.path).c_str(), where(e).c_str(), e.code.message().c_str());
  }
  for (const auto& e : r.notices)
    if (e.operation == treesync::operation::state)
    {
      const std::string more = entry_detail(e, 0);
      const bool ignored = e.code == treesync::errc::state_ignored && !more.empty();  // the detail says why
      std::fprintf(stderr, "treesync: notice: state file %s: %s%s%s\n", display(e.path).c_str(),
                   ignored ? "ignored" : e.code.message().c_str(), more.empty() ? "" : ": ", display(more).c_str());
    }
  for (const auto& e : r.vanished)
    std::fprintf(stderr, "treesync: %s %s (%s): %s (the source changed during the run; the next run retries it)\n",
                 treesync::to_string(e.operation), e.path.empty() ? "." : display(e.path).c_str(), where(e).c_str(),
                 e.code.message().c_str());
}

/// rsync's notice for each special file (FIFO, socket, device) left out without --specials, and
/// each symlink left out by --no-links, on
/// stderr; they are counted as skipped and do not change the exit status (rsync: 0).
/// `name`: SRC's NAME when SRC has no trailing slash (rsync names the entry NAME/PATH, as -i does).
/// `unsafe_links`: under --safe-links a skipped link is an unsafe one, which rsync names only under
/// -v (-v lists it as skipped here): no notice.
inline void print_skipped(const treesync::report& r, const std::string& name = {}, bool unsafe_links = false) {
  for (const auto& e : r.skipped_entries)
    if (e.code == treesync::errc::special_file || (e.code == treesync::errc::skipped_symlink && !unsafe_links))
      std::fprintf(stderr, "skipping non-regular file \"%s\"\n",
                   display(name.empty() ? e.path : name + '/' + e.path).c_str());
}

inline std::string json_error_code(const std::error_code& ec) {
  return "\"code\":" + std::to_string(ec.value()) + ",\"category\":" + json_string(ec.category().name()) +
         ",\"message\":" + json_string(ec.message());
}

/// A list of entry errors: each with its relative path, operation, side ("source" or
/// "destination"), the full path on that side (`full_path`: the root as given, joined) and code.
inline std::string json_entries(const std::vector<treesync::entry_error>& v, const roots& at) {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (k) s += ',';
    s += '{' + json_path("path", v[k].path) + ",\"operation\":" + json_string(treesync::to_string(v[k].operation)) +
         ",\"side\":" + json_string(treesync::to_string(v[k].side)) + ',' + json_path("full_path", at.full_path(v[k])) +
         ',' + json_error_code(v[k].code) + '}';
  }
  return s + ']';
}

/// What a run came to.
struct outcome {
  int exit_code = 0;
  const char* status = "ok";  // ok, errors, vanished, refused, interrupted, max_delete
  std::error_code refusal;    // set when status is "refused"
  const char* signal = nullptr;
  std::size_t deletions_stopped = 0;  // -n --max-delete=N: the planned deletions not listed (exit 25)
};

/// --json: the report as one object on one line (schema: top of examples/treesync.cpp).
/// `extra_members`: a tool's own members, after "jobs", each with its leading comma.
inline std::string json_report(const options& opt, const treesync::report& r, const outcome& out,
                               const std::vector<std::string>* actions, const std::string& refusal_message = {},
                               const std::string& refusal_path = {}, const std::string& extra_members = {}) {
  std::string s = "{\"schema\":1,\"version\":" + json_string(TREESYNC_VERSION_STRING);
  s += ',' + json_path("source", opt.operands[0]);
  s += ',' + json_path("destination", opt.operands[1]);
  // the directory mirrored into: DST, or DST/NAME for SRC without a trailing slash (rsync's rule);
  // the paths of "errors", "vanished", "skipped", "notices" and "actions" are relative to it
  s += ',' + json_path("destination_root", opt.name.empty() ? opt.operands[1] : join_name(opt.operands[1], opt.name));
  s += ",\"dry_run\":" + std::string(opt.lib.dry_run ? "true" : "false");
  s += ",\"jobs\":" + std::to_string(treesync::jobs{opt.jobs}.count());
  s += extra_members;  // a tool's own (treesync_mpi: ranks, frontier_depth, per_rank)
  s += ",\"status\":" + json_string(out.status);
  s += ",\"exit_code\":" + std::to_string(out.exit_code);
  s += ",\"refusal\":";
  if (out.refusal) {
    s += "{\"code\":" + std::to_string(out.refusal.value()) + ",\"category\":" +
         json_string(out.refusal.category().name()) + ",\"message\":" +
         json_string(refusal_message.empty() ? out.refusal.message() : refusal_message) + ',' +
         json_path("path", refusal_path) + '}';
  } else {
    s += "null";
  }
  s += ",\"cancelled\":" + std::string(r.cancelled || out.signal ? "true" : "false");
  s += ",\"signal\":" + (out.signal ? json_string(out.signal) : std::string("null"));
  s += ",\"counts\":{\"scanned\":" + std::to_string(r.scanned) + ",\"created\":" + std::to_string(r.created) +
       ",\"updated\":" + std::to_string(r.updated) + ",\"meta_updated\":" + std::to_string(r.meta_updated) +
       ",\"deleted\":" + std::to_string(r.deleted) + ",\"excluded\":" + std::to_string(r.excluded) +
       ",\"skipped\":" + std::to_string(r.skipped) + ",\"cleaned\":" + std::to_string(r.cleaned) + ",\"settled\":" + std::to_string(r.settled) +
       ",\"errors\":" + std::to_string(r.errors.size()) + ",\"vanished\":" + std::to_string(r.vanished.size()) + '}';
  s += ",\"bytes_copied\":" + std::to_string(r.bytes_copied);
  char num[64];
  std::snprintf(num, sizeof num, "%.6f", seconds(r));
  s += ",\"elapsed_seconds\":" + std::string(num);
  std::snprintf(num, sizeof num, "%.0f", rate(r));
  s += ",\"bytes_per_second\":" + std::string(num);
  const roots at{opt.src_root, opt.dst_root};
  s += ",\"errors\":" + json_entries(r.errors, at);
  s += ",\"vanished\":" + json_entries(r.vanished, at);
  s += ",\"skipped\":" + json_entries(r.skipped_entries, at);
  s += ",\"notices\":" + json_entries(r.notices, at);
  if (actions) {
    s += ",\"actions\":[";
    for (std::size_t k = 0; k < actions->size(); ++k) {
      if (k) s += ',';
      s += (*actions)[k];
    }
    s += ']';
  }
  return s + "}\n";
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_OUTPUT_HPP
