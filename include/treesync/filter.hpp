// treesync/filter.hpp - exclusion: glob patterns, exclude lists, rsync filter rules, predicate combinators
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_FILTER_HPP
#define TREESYNC_FILTER_HPP

#include "core.hpp"
#include "detail/filter_rules.hpp"
#include "detail/glob.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.policy.exclude] ---------------------------------------------------------------------
//
// An excluded entry is neither copied nor deleted (unless the deletion policy deletes excluded
// entries); an excluded directory is not entered.
// Requirement: `bool excluded(std::string_view rel, file_type type) const`, or any callable
// `bool(std::string_view rel, file_type type)`.

/// One rsync/gitignore-style pattern: without '/' it matches a name at any depth; with '/' it is
/// anchored at the root (a leading '/' is optional); `*` and `?` stop at '/', `**` spans
/// directories (`**/` also matches zero directories); `[a-z]`, `[!x]`, `[^x]`, `\` escapes; a
/// trailing '/' matches directories only.
class glob {
 public:
  explicit glob(std::string_view pattern) {
    if (!pattern.empty() && pattern.back() == '/') {
      dirs_only_ = true;
      pattern.remove_suffix(1);
    }
    if (!pattern.empty() && pattern.front() == '/') {
      anchored_ = true;
      pattern.remove_prefix(1);
    }
    if (pattern.find('/') != std::string_view::npos) anchored_ = true;
    pattern_ = std::string(pattern);
  }
  bool matches(std::string_view rel, file_type type) const {
    if (dirs_only_ && type != file_type::directory) return false;
    if (anchored_) return detail::glob_match(pattern_, rel);
    const auto slash = rel.rfind('/');
    return detail::glob_match(pattern_, slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  }
  const std::string& pattern() const noexcept { return pattern_; }
  bool anchored() const noexcept { return anchored_; }
  bool dirs_only() const noexcept { return dirs_only_; }

 private:
  std::string pattern_;
  bool anchored_ = false;
  bool dirs_only_ = false;
};

/// Excludes what matches any of its patterns: `treesync::exclude{"*.pyc", "__pycache__/"}`.
class exclude {
 public:
  exclude(std::initializer_list<std::string_view> patterns) {
    for (auto p : patterns) add(p);
  }
  template <class Range, class = decltype(std::begin(std::declval<const Range&>()))>
  explicit exclude(const Range& patterns) {
    for (const auto& p : patterns) add(p);
  }
  exclude& add(std::string_view pattern) {
    if (!pattern.empty()) globs_.emplace_back(pattern);
    return *this;
  }
  /// Patterns from the text of an exclude file (rsync --exclude-from): one per line; blank lines
  /// and lines starting with '#' or ';' are ignored; a trailing '\r' is dropped (CRLF files).
  /// Leading and other trailing spaces are part of the pattern, as in rsync.
  static exclude from_lines(std::string_view text) {
    exclude out{};
    detail::for_each_rule_line(text, [&out](std::string_view line) { out.add(line); });
    return out;
  }
  bool excluded(std::string_view rel, file_type type) const {
    for (const auto& g : globs_)
      if (g.matches(rel, type)) return true;
    return false;
  }
  std::size_t size() const noexcept { return globs_.size(); }
  /// The patterns, in order (a state file is tied to them).
  std::string state_key() const {
    std::string k = "exclude";
    for (const auto& g : globs_) k += std::string(g.anchored() ? " /" : " ") + std::to_string(g.pattern().size()) + ':' + g.pattern() + (g.dirs_only() ? "/" : "");
    return k;
  }

 private:
  std::vector<glob> globs_;
};

/// Ordered include/exclude rules with rsync's filter semantics (`rsync --filter`, `--include`,
/// `--exclude`, `-F`): the first rule that matches an entry decides; an entry no rule matches is
/// included.  The engine asks as the walk reaches each entry, so an excluded directory is never
/// entered (its contents are not even looked at) and a directory no rule excludes is entered:
/// select only headers with `filter{}.include("*/").include("*.h").exclude("*")`.
///
/// Patterns, as rsync's (`INCLUDE/EXCLUDE PATTERN RULES`):
///  - a leading '/' anchors the pattern at the root of the transfer (for a rule read from a
///    per-directory file: at the directory holding the file);
///  - a trailing '/' matches directories only;
///  - `*` and `?` do not match '/', `**` matches anything including '/', `[...]` is a class
///    (`!`/`^` negation, ranges, `[:digit:]`...), `\` escapes a wildcard;
///  - a pattern with no '/' (a trailing one aside) and no `**` is matched against the last
///    component; an unanchored pattern with a '/' against the last components of the path (as
///    many as it has), or, when it holds `**`, against the path from any component on;
///  - `dir/***` matches `dir` itself and everything below it.
///
/// Per-directory rule files (`dir_merge(".rsync-filter")`, rsync's `dir-merge` and `-F`): for an
/// entry, the files named so in the directories above it are consulted at the place of the
/// dir_merge rule, the deepest first, each holding rules in the syntax of add_rule() (a `!` in
/// one drops the rules inherited from above).  Inside a rule file, `merge FILE` / `. FILE` reads
/// FILE (relative to the rule file's directory) in place, and `dir-merge NAME` / `: NAME` starts
/// per-directory files called NAME from that directory down (a name already active is ignored,
/// as in rsync); the merge modifiers `-` / `+` (every line a pattern with that action), `C`
/// (cvsignore style: `n`, `w`, `-`), `e` (exclude the rule file itself), `n` (not inherited by
/// subdirectories) and `w` (split on whitespace) are rsync's; the rule modifier `!` (match when
/// the pattern does not).  Any other line, or an unsupported modifier, throws filter_error
/// ("Unknown filter rule: ...") from excluded(): the run stops there, before writing anything
/// below the directory whose file it is; prepare() reads the root's files up front.  A chain of
/// `merge` files deeper than 32 (a merge file that merges itself) throws merge_depth_error, a
/// filter_error (rsync's "merge-file include depth limit (32) exceeded"); one rule file merges at
/// most 1,024 files in all, nested or side by side (filter_error past that; rsync has no such
/// bound: it keeps the file reads a rule file can cause per directory small).
///
/// Merge names in a rule file resolve like the file itself: `merge NAME`, `. NAME`, `dir-merge
/// NAME` and `: NAME` must be a relative path below the rule file's directory ("x" or "sub/x");
/// an absolute name or one with a `..` (or `.`, or empty) component is a bad line (filter_error,
/// nothing opened; rsync would read it).  A merged file that is missing, unreadable or not a
/// regular file holds no rules (rsync stops with code 11 for a missing `merge` file; a missing
/// dir-merge file holds no rules in both).  DST's rule files (the CLI's) read what they merge through
/// detail::read_dst_merge_file, which refuses (filter_error) a file their writer could not read,
/// and then a missing one too.
///
/// The files are read through the `loader` given at construction: `filter::reading(root)` reads
/// `root/DIR/NAME`, NAME's components opened one by one from DIR's descriptor with O_NOFOLLOW
/// (no symlink followed in NAME), and nothing opened for reading before it is known to be a
/// regular file (O_PATH + fstat, then a reopen of that very inode: a FIFO, device or socket
/// named by a rule file is never opened for I/O); a missing, unreadable or non-regular file
/// holds no rules; one larger than max_rule_file_size is a filter_error.
///
/// Budget: the rules parsed from rule files (per-directory and merged, not those added by
/// add_rule()) that the filter's contexts hold at once count against max_rules() (default
/// default_max_rules, about 100 bytes of memory each), shared by all threads and by the filters
/// given share_rule_budget().  A rule counts once more for each further 64 bytes of its pattern,
/// a `merge` line counts once, and a file merged N times counts N times (it is parsed N times):
/// what is counted bounds the memory the rules hold.  A rule file past the budget gives back all
/// it held.  Past it, for a rule file of a directory: keep_all_past_budget(false)
/// (the default, for the transfer side) throws filter_error (the run stops there: a partial rule
/// set would copy what should be excluded or skip what should be copied); keep_all_past_budget(true)
/// (for a deletion side: what is excluded is kept) gives that directory the rule `- *`: all in
/// it and below it is excluded, i.e. kept.  The texts being parsed at once (a file and the files
/// it merges) are bounded by twice max_rule_file_size the same way.  Cost
/// and memory: each calling thread keeps the chain of rule contexts of the directory it is in
/// (one per directory from the root down, each reusing its parent's), so an entry costs one
/// comparison of its parent path with the thread's current directory plus the rules in force;
/// the contexts are shared between threads: a directory's files are read when the first thread
/// enters it and released when every thread has left it (a directory is read again if the walk
/// comes back to it).  excluded() may be called
/// from several worker threads at once.  Pass the run's source directory as root;
/// destination-only directories have no rule files.
class filter : private detail::filter_rules {
 public:
  /// Reads the per-directory file `name` of the directory `dir` (relative to the source, "" for
  /// the root); an empty result holds no rules.  May throw filter_error.
  using loader = detail::filter_rules::loader;

  /// The largest rule file filter::reading() accepts (a larger one is a filter_error).
  static constexpr std::size_t max_rule_file_size = max_file_size;

  /// The default of max_rules(): 1,000,000 parsed rules (about 100 MB).
  static constexpr std::size_t default_max_rules = 1000000;

  filter() = default;
  explicit filter(loader load) : filter_rules(std::move(load)) {}
  // A copy has the rules, the loader and the rule budget (shared), and contexts of its own.
  filter(const filter&) = default;
  filter& operator=(const filter&) = default;
  filter(filter&&) noexcept = default;
  filter& operator=(filter&&) noexcept = default;
  ~filter() = default;

  /// A filter whose per-directory rule files are read from the directory `root`.  Each thread
  /// keeps the directory it read from last open and reaches the next one from it (openat(), one
  /// component at a time, following links to directories as the walk does): no path is resolved
  /// from the root per file, and no path is too long for the kernel.
  static filter reading(std::filesystem::path root) {
    auto st = std::make_shared<dir_reader>();
    st->root = std::move(root);
    return filter([st](std::string_view dir, std::string_view name) { return st->read(dir, name); });
  }

  filter& include(std::string_view pattern) { return add(true, pattern), *this; }
  filter& exclude(std::string_view pattern) { return add(false, pattern), *this; }
  /// Per-directory rule files called `name` (rsync `dir-merge NAME`; `-F` is ".rsync-filter").
  filter& dir_merge(std::string_view name) { return push(merge_rule(name, 0)), *this; }
  /// Drops every rule added so far (rsync's `!`).
  filter& clear() {
    rules_.clear();
    return changed(), *this;
  }

  /// One rule in rsync's --filter syntax: `+ PAT`, `- PAT`, `include PAT`, `exclude PAT`,
  /// `dir-merge NAME`, `: NAME` (with the merge modifiers above, e.g. `:- .gitignore`), `!`
  /// (clear); the modifier `!` on `+`/`-`.  Returns false (and adds nothing) on anything else,
  /// `merge FILE` included (a single-instance merge is read only inside a rule file).
  bool add_rule(std::string_view line) {
    parsed p;
    if (!parse_rule(line, p) || p.kind == kind_merge) return false;
    if (p.kind == kind_clear) return clear(), true;
    if (p.kind == kind_dir_merge) {
      if (p.mods & mod_self) add(false, basename(p.arg));
      return push(merge_rule(p.arg, p.mods)), true;
    }
    add(p.kind == kind_include, p.arg, (p.mods & mod_negate) != 0);
    return true;
  }

  /// The lines of a rule file (a per-directory file, `--filter` merge text): one rule per line as
  /// add_rule() reads them; blank lines and lines starting with '#' or ';' are ignored, a trailing
  /// '\r' dropped.  With `plain` set (rsync --exclude-from / --include-from), a line that is not
  /// `+ PAT`, `- PAT` or `!` is a pattern with that action.  Returns the number of lines that were
  /// not understood (they add nothing).
  std::size_t add_rules(std::string_view text, std::optional<bool> plain_include = std::nullopt) {
    std::size_t bad = 0;
    detail::for_each_rule_line(text, [&](std::string_view line) {
      if (plain_include) {
        add_plain(line, *plain_include);
      } else if (!add_rule(line)) {
        ++bad;
      }
    });
    return bad;
  }

  /// A pattern as rsync's --include / --exclude take it: `+ PAT` and `- PAT` override the action,
  /// a lone `!` clears the rules.
  filter& add_plain(std::string_view pattern, bool include_it) {
    if (pattern == "!") return clear();
    if (pattern.size() > 2 && (pattern[0] == '+' || pattern[0] == '-') && pattern[1] == ' ')
      return add(pattern[0] == '+', pattern.substr(2)), *this;
    return add(include_it, pattern), *this;
  }

  bool excluded(std::string_view rel, file_type type) const {
    if (!has_merge_) return decide(rules_, rel, type, nullptr, 0, 0) == 0;
    const auto slash = rel.rfind('/');
    const std::shared_ptr<cursor> cur = thread_cursor();
    const dir_ctx* ctx = cur->enter(*this, slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash));
    return decide(rules_, rel, type, ctx, 0, 0) == 0;
  }

  /// Reads the root directory's rule files now (a filter_error is thrown here, before a run
  /// starts, rather than from the run's first excluded()).
  void prepare() const {
    if (has_merge_) thread_cursor()->enter(*this, std::string_view());
  }

  /// The most rules the rule files read may hold at once (see Budget above).
  filter& max_rules(std::size_t n) {
    shared_->budget->limit = n;
    return changed(), *this;
  }
  std::size_t max_rules() const noexcept { return shared_->budget->limit; }
  /// Past the budget: excluded everything below (true) or throw filter_error (false, the default).
  filter& keep_all_past_budget(bool keep) {
    shared_->past = keep ? past_budget::keep_all : past_budget::refuse;
    return changed(), *this;
  }
  /// Counts this filter's rule-file rules in the same budget as `other`'s (its max_rules()).
  filter& share_rule_budget(const filter& other) {
    shared_->budget = other.shared_->budget;
    return changed(), *this;
  }
  /// The rules parsed from rule files that the filters sharing this one's budget hold now.
  std::size_t rules_held() const noexcept { return shared_->budget->held.load(); }
  /// How many rule files were past the budget (not parsed) so far, in the filters sharing it.
  std::size_t budget_overflows() const noexcept { return shared_->budget->overflows.load(); }

  std::size_t size() const noexcept { return rules_.size(); }
  bool empty() const noexcept { return rules_.empty(); }
  /// What a state file is tied to: that the run was filtered (the rules may change between runs:
  /// the walk reads the source either way, and what a rule change leaves in DST is decided anew).
  const char* state_key() const { return "filter"; }

  /// The regular file at `path` (relative to the directory `at`; no symlink followed at its last
  /// component); empty when it is
  /// missing, not a regular file or unreadable; filter_error when it is larger than
  /// max_rule_file_size.
  /// Opened as rule files are: nothing opened for reading before it is known to be a regular file.
  static std::string read_rule_file(const char* path, int at = AT_FDCWD) { return read_file(path, at); }

  /// The rule file `name` of the directory `dir` below the directory open as `at`, as a rule
  /// file's merge names are read: every component of `dir` and of `name` opened from its
  /// parent's descriptor with O_NOFOLLOW (a symlink anywhere: nothing read), `name` a relative
  /// path with no `.`/`..` component (else nothing read), a regular file only (see
  /// read_rule_file).  Empty when there is nothing to read; filter_error when too large.
  static std::string read_rule_file_below(int at, std::string_view dir, std::string_view name) {
    return read_below(at, dir, name);
  }

  /// The two halves of read_rule_file, for a caller that decides on the open file before reading
  /// it (detail::read_dst_merge_file: its owner and mode): a descriptor open for reading on the
  /// regular file `name` of the directory `at` (the last component not followed, nothing opened
  /// for I/O before it is known to be a regular file), or -1; and the text of the file open as
  /// `fd` (closed here; empty for -1), filter_error naming it `what` when it is larger than
  /// max_rule_file_size.
  static int open_rule_file(int at, const char* name) { return open_regular(at, name); }
  /// Whether a rule file may merge `name`: a relative path below its directory, no `.`, `..` or
  /// empty component (a `merge` line naming anything else is a bad line).
  static bool merge_name_allowed(std::string_view name) { return merge_name_ok(name); }
  static std::string read_open_rule_file(int fd, const std::string& what) { return read_open(fd, what); }
};

/// Excludes nothing (the default).
struct exclude_nothing_t {
  const char* state_key() const { return "nothing"; }
  bool excluded(std::string_view, file_type) const { return false; }
};
inline constexpr exclude_nothing_t exclude_nothing{};

namespace detail {
template <class P, class = void>
struct has_excluded_member : std::false_type {};
template <class P>
struct has_excluded_member<P, std::void_t<decltype(bool(std::declval<const P&>().excluded(
                                  std::declval<std::string_view>(), std::declval<file_type>())))>>
    : std::true_type {};
template <class P, class = void>
struct is_exclude_callable : std::false_type {};
template <class P>
struct is_exclude_callable<P, std::void_t<decltype(bool(std::declval<const P&>()(
                                  std::declval<std::string_view>(), std::declval<file_type>())))>>
    : std::true_type {};

template <class P>
bool call_excluded(const P& p, std::string_view rel, file_type t) {
  if constexpr (has_excluded_member<P>::value)
    return p.excluded(rel, t);
  else
    return p(rel, t);
}

template <bool Any, class... Ps>
struct predicate_combination {
  std::tuple<Ps...> preds;
  bool excluded(std::string_view rel, file_type t) const {
    return std::apply(
        [&](const auto&... p) {
          if constexpr (Any)
            return (false || ... || call_excluded(p, rel, t));
          else
            return (true && ... && call_excluded(p, rel, t));
        },
        preds);
  }
};

template <class P>
struct negated_predicate {
  P pred;
  bool excluded(std::string_view rel, file_type t) const { return !call_excluded(pred, rel, t); }
};
}  // namespace detail

/// Excluded when any of the predicates excludes it.
template <class... Ps>
detail::predicate_combination<true, std::decay_t<Ps>...> any_of(Ps&&... ps) {
  return {std::tuple<std::decay_t<Ps>...>(std::forward<Ps>(ps)...)};
}
/// Excluded when all of the predicates exclude it.
template <class... Ps>
detail::predicate_combination<false, std::decay_t<Ps>...> all_of(Ps&&... ps) {
  return {std::tuple<std::decay_t<Ps>...>(std::forward<Ps>(ps)...)};
}
/// Excluded when the predicate does not exclude it ("only *.h": `not_(exclude{"*.h"})` - but
/// mind that directories must then be let through too).
template <class P>
detail::negated_predicate<std::decay_t<P>> not_(P&& p) {
  return {std::forward<P>(p)};
}



}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_FILTER_HPP
