// treesync/filter.hpp - exclusion: glob patterns, exclude lists, rsync filter rules, predicate combinators
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_FILTER_HPP
#define TREESYNC_FILTER_HPP

#include "policies.hpp"

#include <iterator>
#include <map>
#include <stdexcept>

namespace treesync {
inline namespace v0 {

// [treesync.policy.exclude] ---------------------------------------------------------------------
//
// An excluded entry is neither copied nor deleted (unless the deletion policy deletes excluded
// entries); an excluded directory is not entered.
// Requirement: `bool excluded(std::string_view rel, file_type type) const`, or any callable
// `bool(std::string_view rel, file_type type)`.

namespace detail {
bool glob_match(std::string_view pattern, std::string_view text);
}

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
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty() && line.front() != '#' && line.front() != ';') out.add(line);
      pos = end + 1;
    }
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

namespace detail {

// Whether `c` is in the POSIX character class `name` ("alpha", "digit", ...); `known` is false
// for a name that is no class.
inline bool in_char_class(std::string_view name, unsigned char c, bool& known) {
  const int ci = static_cast<int>(c);
  known = true;
  if (name == "alnum") return std::isalnum(ci) != 0;
  if (name == "alpha") return std::isalpha(ci) != 0;
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "cntrl") return std::iscntrl(ci) != 0;
  if (name == "digit") return c >= '0' && c <= '9';
  if (name == "graph") return std::isgraph(ci) != 0;
  if (name == "lower") return std::islower(ci) != 0;
  if (name == "print") return std::isprint(ci) != 0;
  if (name == "punct") return std::ispunct(ci) != 0;
  if (name == "space") return std::isspace(ci) != 0;
  if (name == "upper") return std::isupper(ci) != 0;
  if (name == "xdigit") return std::isxdigit(ci) != 0;
  known = false;
  return false;
}

// The bracket expression at p[i] == '[': `[...]` with `!`/`^`, ranges and `\` escapes, and with
// `classes` the POSIX classes `[:alpha:]` etc. (rsync's wildmatch; glob has none).  Whether `c`
// matches; `valid` false for an unterminated bracket (then a literal '['); on a match, `i` moves
// past the ']'.  An unknown class matches nothing and fails the whole pattern, as in rsync.
inline bool match_bracket(std::string_view p, std::size_t& i, unsigned char c, bool& valid, bool classes = false) {
  std::size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  while (j < p.size() && (first || p[j] != ']')) {
    first = false;
    const std::size_t end = classes && p[j] == '[' && j + 1 < p.size() && p[j + 1] == ':' ? p.find(":]", j + 2)
                                                                                          : std::string_view::npos;
    if (end != std::string_view::npos) {
      bool known = false;
      if (in_char_class(p.substr(j + 2, end - j - 2), c, known)) matched = true;
      if (!known) {
        valid = true;
        i = p.size();
        return false;
      }
      j = end + 2;
      continue;
    }
    unsigned char lo = static_cast<unsigned char>(p[j]);
    if (lo == '\\' && j + 1 < p.size()) lo = static_cast<unsigned char>(p[++j]);
    ++j;
    unsigned char hi = lo;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      hi = static_cast<unsigned char>(p[j + 1]);
      if (hi == '\\' && j + 2 < p.size()) {
        hi = static_cast<unsigned char>(p[j + 2]);
        ++j;
      }
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  if (j >= p.size()) {
    valid = false;
    return false;
  }
  valid = true;
  i = j + 1;  // past ']'
  return matched != negate;
}

// rsync's wildmatch, over one string: `*` and `?` never match '/', a run of two or more stars
// matches anything ('/' included; unlike glob_match, `**/` does not also match zero directories),
// `[...]` with `!`/`^`, ranges, `\` escapes and the POSIX classes `[:alpha:]` etc.; `\` escapes.
inline bool wild_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si,
                      std::vector<bool>& failed) {
  const std::size_t key = pi * (s.size() + 1) + si;
  if (failed[key]) return false;
  while (pi < p.size()) {
    const char c = p[pi];
    if (c == '*') {
      std::size_t k = pi;
      while (k < p.size() && p[k] == '*') ++k;
      const bool any = k - pi >= 2;
      for (std::size_t j = si;; ++j) {
        if (wild_step(p, k, s, j, failed)) return true;
        if (j == s.size() || (!any && s[j] == '/')) break;
      }
      failed[key] = true;
      return false;
    }
    if (si == s.size()) break;
    const auto sc = static_cast<unsigned char>(s[si]);
    if (c == '?') {
      if (sc == '/') break;
      ++pi;
      ++si;
      continue;
    }
    if (c == '[') {
      bool valid = false;
      std::size_t next = pi;
      const bool m = match_bracket(p, next, sc, valid, true);
      if (valid) {
        if (!m || sc == '/') break;
        pi = next;
        ++si;
        continue;
      }
    }
    char lit = c;
    if (c == '\\' && pi + 1 < p.size()) lit = p[++pi];
    if (lit != s[si]) break;
    ++pi;
    ++si;
  }
  if (pi == p.size() && si == s.size()) return true;
  failed[key] = true;
  return false;
}

inline bool wild_match(std::string_view pattern, std::string_view text) {
  std::vector<bool> failed((pattern.size() + 1) * (text.size() + 1), false);
  return wild_step(pattern, 0, text, 0, failed);
}

}  // namespace detail

/// A rule file treesync cannot use: a line that is no rule it knows (rsync's "Unknown filter
/// rule"), a rule file larger than filter::max_rule_file_size, merges nested too deep.  Thrown
/// by filter::excluded() when it reads such a file; the run stops (sync() rethrows it).
class filter_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
/// below the directory whose file it is; prepare() reads the root's files up front.
///
/// The files are read through the `loader` given at construction: `filter::reading(root)` reads
/// `root/DIR/NAME` with open(O_NOFOLLOW), regular files only (a missing, unreadable or
/// non-regular file holds no rules; one larger than max_rule_file_size is a filter_error).  Cost
/// and memory: each calling thread keeps the chain of rule contexts of the directory it is in
/// (one per directory from the root down, each reusing its parent's), so an entry costs one
/// comparison of its parent path with the thread's current directory plus the rules in force;
/// the contexts are shared between threads: a directory's files are read when the first thread
/// enters it and released when every thread has left it (a directory is read again if the walk
/// comes back to it).  excluded() may be called
/// from several worker threads at once.  Pass the run's source directory as root;
/// destination-only directories have no rule files.
class filter {
 public:
  /// Reads the per-directory file `name` of the directory `dir` (relative to the source, "" for
  /// the root); an empty result holds no rules.  May throw filter_error.
  using loader = std::function<std::string(std::string_view dir, std::string_view name)>;

  /// The largest rule file filter::reading() accepts (a larger one is a filter_error).
  static constexpr std::size_t max_rule_file_size = std::size_t{4} << 20;

  filter() : shared_(std::make_shared<shared_state>()) {}
  explicit filter(loader load) : filter() { shared_->load = std::move(load); }
  // A copy has the rules and the loader, and contexts of its own.
  filter(const filter& o) : rules_(o.rules_), has_merge_(o.has_merge_), shared_(std::make_shared<shared_state>()) {
    shared_->load = o.shared_->load;
  }
  filter& operator=(const filter& o) {
    if (this != &o) {
      filter copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
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

  filter& include(std::string_view pattern) { return add(true, pattern); }
  filter& exclude(std::string_view pattern) { return add(false, pattern); }
  /// Per-directory rule files called `name` (rsync `dir-merge NAME`; `-F` is ".rsync-filter").
  filter& dir_merge(std::string_view name) { return push(merge_rule(name, 0)); }
  /// Drops every rule added so far (rsync's `!`).
  filter& clear() {
    rules_.clear();
    return changed();
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
    for_each_line(text, [&](std::string_view line) {
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
      return add(pattern[0] == '+', pattern.substr(2));
    return add(include_it, pattern);
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

  std::size_t size() const noexcept { return rules_.size(); }
  bool empty() const noexcept { return rules_.empty(); }
  /// What a state file is tied to: that the run was filtered (the rules may change between runs:
  /// the walk reads the source either way, and what a rule change leaves in DST is decided anew).
  const char* state_key() const { return "filter"; }

  /// The regular file at `path` (relative to the directory `at`; no symlink followed at its last
  /// component); empty when it is
  /// missing, not a regular file or unreadable; filter_error when it is larger than
  /// max_rule_file_size.
  static std::string read_rule_file(const char* path, int at = AT_FDCWD) {
    std::string out;
    const int fd = ::openat(at, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return out;
    struct stat st;
    bool too_large = false;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      too_large = static_cast<std::uintmax_t>(st.st_size) > max_rule_file_size;
      char buf[8192];
      while (!too_large) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          if (n < 0) out.clear();
          break;
        }
        out.append(buf, static_cast<std::size_t>(n));
        too_large = out.size() > max_rule_file_size;
      }
    }
    ::close(fd);
    if (too_large)
      throw filter_error("rule file " + std::string(path) + " is larger than " +
                         std::to_string(max_rule_file_size >> 20) + " MiB");
    return out;
  }

 private:
  enum : unsigned {
    mod_exclude = 1,    // '-': every line an exclude pattern
    mod_include = 2,    // '+': every line an include pattern
    mod_cvs = 4,        // 'C'
    mod_self = 8,       // 'e'
    mod_no_inherit = 16,  // 'n'
    mod_words = 32,     // 'w'
    mod_negate = 64,    // '!' on an include/exclude rule
  };
  enum rule_kind { kind_include, kind_exclude, kind_merge, kind_dir_merge, kind_clear };

  struct rule {
    std::string pattern;  // without the leading '/' of an anchored pattern and the trailing '/'
    bool include = false;
    bool merge = false;
    bool anchored = false;
    bool dirs_only = false;
    bool negate = false;
    bool wild = false;    // holds '*', '?' or '['
    bool wild2 = false;   // holds "**"
    bool wild2_prefix = false;
    bool wild3_suffix = false;
    unsigned mods = 0;        // a dir-merge rule's modifiers
    std::size_t slashes = 0;  // '/' in the pattern, the leading one counted, the trailing one not
  };
  struct parsed {
    rule_kind kind = kind_exclude;
    unsigned mods = 0;
    std::string_view arg;
  };

  // One rule file as read for one directory: its rules (single-instance merges read in place).
  struct rule_file {
    std::vector<rule> rules;
    bool cleared = false;  // held a '!': the rules of the directories above do not apply
  };
  // The rules of one dir-merge name in force in a directory: its own file, then the inherited.
  struct layer {
    std::shared_ptr<const rule_file> file;
    std::shared_ptr<const layer> up;
    std::size_t base = 0;  // the length of "DIR/" (0 at the root): anchored patterns start there
  };
  // One active dir-merge name: the rule that started it (kept alive by `owner`, the rule file
  // holding it, or the filter itself), what applies in this directory, what its subdirectories
  // inherit.
  struct slot {
    const rule* merge = nullptr;
    std::shared_ptr<const rule_file> owner;
    std::shared_ptr<const layer> current;
    std::shared_ptr<const layer> inherit;
  };
  // The rules in force in one directory.  Shared by every thread in that directory: a thread
  // that enters a subdirectory another thread is in (or holds in its chain) takes its context
  // from `children` instead of reading the directory's files again; a context lives while some
  // thread's chain holds it (the weak entries of those gone are swept as the list grows).
  struct dir_ctx {
    std::vector<slot> slots;
    mutable std::mutex mu;  // children; held while a child's context is built (one read per directory)
    mutable std::map<std::string, std::weak_ptr<const dir_ctx>, std::less<>> children;
    mutable std::size_t sweep_at = 16;
    const slot* find(const rule* r) const {
      for (const slot& s : slots)
        if (s.merge == r) return &s;
      return nullptr;
    }
  };

  // A thread's position: the contexts from the root down to the directory `dir`.
  struct cursor {
    std::string dir;
    std::vector<std::pair<std::size_t, std::shared_ptr<const dir_ctx>>> stack;  // (length of the prefix, context)

    const dir_ctx* enter(const filter& f, std::string_view pd) {
      if (!stack.empty() && pd.size() == dir.size() && pd == std::string_view(dir)) return stack.back().second.get();
      if (stack.empty()) {
        dir.clear();
        stack.emplace_back(0, f.root_ctx());
      }
      const std::size_t n = std::min(dir.size(), pd.size());
      std::size_t common = 0;
      while (common < n && dir[common] == pd[common]) ++common;
      while (stack.size() > 1) {
        const std::size_t e = stack.back().first;
        if (e <= common && (e == pd.size() || pd[e] == '/')) break;
        stack.pop_back();
      }
      dir.resize(stack.back().first);
      std::size_t pos = stack.back().first;
      while (pos < pd.size()) {
        const std::size_t start = pos == 0 ? 0 : pos + 1;
        std::size_t next = pd.find('/', start);
        if (next == std::string_view::npos) next = pd.size();
        auto ctx = f.child_ctx(*stack.back().second, pd.substr(start, next - start), pd.substr(0, next), next + 1);
        stack.emplace_back(next, std::move(ctx));
        dir.append(pd.data() + pos, next - pos);
        pos = next;
      }
      return stack.back().second.get();
    }
  };

  // filter::reading()'s loader: per thread, the directory it read from last, open.
  struct dir_reader {
    struct place {
      std::string dir;
      int fd = -1;
    };
    std::filesystem::path root;
    std::mutex mu;
    std::vector<std::pair<std::thread::id, std::shared_ptr<place>>> places;

    ~dir_reader() {
      for (auto& p : places)
        if (p.second->fd >= 0) ::close(p.second->fd);
    }

    std::shared_ptr<place> mine() {
      const auto me = std::this_thread::get_id();
      std::lock_guard<std::mutex> lock(mu);
      for (auto& p : places)
        if (p.first == me) return p.second;
      if (places.size() >= 64) {  // threads of runs gone by
        for (auto& p : places)
          if (p.second->fd >= 0) ::close(p.second->fd);
        places.clear();
      }
      places.emplace_back(me, std::make_shared<place>());
      return places.back().second;
    }

    std::string read(std::string_view dir, std::string_view name) {
      if (!name.empty() && name.front() == '/') return read_rule_file(std::string(name).c_str());
      const std::shared_ptr<place> p = mine();
      std::size_t pos = 0;  // what is left to descend to from p->fd
      const bool below = p->fd >= 0 && (p->dir.empty() || (dir.size() >= p->dir.size() &&
                                                           dir.compare(0, p->dir.size(), p->dir) == 0 &&
                                                           (dir.size() == p->dir.size() || dir[p->dir.size()] == '/')));
      if (below) {
        pos = p->dir.size();
      } else {
        if (p->fd >= 0) ::close(p->fd);
        p->dir.clear();
        p->fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->fd < 0) return std::string();
      }
      while (pos < dir.size()) {
        if (dir[pos] == '/') ++pos;
        std::size_t end = dir.find('/', pos);
        if (end == std::string_view::npos) end = dir.size();
        const std::string comp(dir.substr(pos, end - pos));
        const int next = ::openat(p->fd, comp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (next < 0) return std::string();  // p->dir still names p->fd
        ::close(p->fd);
        p->fd = next;
        p->dir.assign(dir.data(), end);
        pos = end;
      }
      const std::string n(name);
      return read_rule_file(n.c_str(), p->fd);
    }
  };

  struct shared_state {
    loader load;
    std::mutex mu;
    std::vector<std::pair<std::thread::id, std::shared_ptr<cursor>>> cursors;
    std::shared_ptr<const dir_ctx> root;  // the root's context, shared by every thread's chain
  };

  filter& changed() {
    has_merge_ = std::any_of(rules_.begin(), rules_.end(), [](const rule& r) { return r.merge; });
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->cursors.clear();  // their contexts point into the old rules
    shared_->root.reset();
    return *this;
  }

  // The root directory's context, built once (its files read when the first thread asks).
  std::shared_ptr<const dir_ctx> root_ctx() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!shared_->root) shared_->root = build(nullptr, std::string_view(), 0);
    return shared_->root;
  }

  // The context of `parent`'s subdirectory `name` (`dir` its path, `base` = dir.size() + 1): the
  // one a thread already holds, or built now, under parent's lock so that threads entering the
  // directory together read its files once.
  std::shared_ptr<const dir_ctx> child_ctx(const dir_ctx& parent, std::string_view name, std::string_view dir,
                                           std::size_t base) const {
    std::lock_guard<std::mutex> lock(parent.mu);
    auto& kids = parent.children;
    const auto it = kids.find(name);
    if (it != kids.end())
      if (auto live = it->second.lock()) return live;
    std::shared_ptr<const dir_ctx> ctx = build(&parent, dir, base);
    if (it != kids.end()) {
      it->second = ctx;
    } else {
      if (kids.size() >= parent.sweep_at) {  // drop the entries of directories every thread has left
        for (auto k = kids.begin(); k != kids.end();) k = k->second.expired() ? kids.erase(k) : std::next(k);
        parent.sweep_at = std::max<std::size_t>(16, 2 * kids.size());
      }
      kids.emplace(std::string(name), ctx);
    }
    return ctx;
  }

  filter& push(rule r) {
    rules_.push_back(std::move(r));
    return changed();
  }

  std::shared_ptr<cursor> thread_cursor() const {
    const auto me = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (auto& c : shared_->cursors)
      if (c.first == me) return c.second;
    if (shared_->cursors.size() >= 256) shared_->cursors.clear();  // threads of runs gone by
    shared_->cursors.emplace_back(me, std::make_shared<cursor>());
    return shared_->cursors.back().second;
  }

  static std::string_view basename(std::string_view name) {
    const auto slash = name.rfind('/');
    return slash == std::string_view::npos ? name : name.substr(slash + 1);
  }

  // rsync's rule syntax: `+ PAT`, `-! PAT`, `:n- NAME`, `dir-merge,e NAME`, `!`...
  static bool parse_rule(std::string_view line, parsed& out) {
    if (line.empty()) return false;
    std::size_t i = 0;
    const char c = line[0];
    static constexpr std::pair<std::string_view, rule_kind> words[] = {
        {"include", kind_include}, {"exclude", kind_exclude}, {"merge", kind_merge},
        {"dir-merge", kind_dir_merge}, {"clear", kind_clear}};
    bool found = false;
    for (const auto& w : words) {
      if (line.compare(0, w.first.size(), w.first) == 0 &&
          (line.size() == w.first.size() || line[w.first.size()] == ',' || line[w.first.size()] == ' ' ||
           line[w.first.size()] == '_')) {
        out.kind = w.second;
        i = w.first.size();
        if (i < line.size() && line[i] == ',') ++i;
        found = true;
        break;
      }
    }
    if (!found) {
      switch (c) {
        case '+': out.kind = kind_include; break;
        case '-': out.kind = kind_exclude; break;
        case '.': out.kind = kind_merge; break;
        case ':': out.kind = kind_dir_merge; break;
        case '!': out.kind = kind_clear; break;
        default: return false;
      }
      i = 1;
    }
    const bool merging = out.kind == kind_merge || out.kind == kind_dir_merge;
    for (; i < line.size() && line[i] != ' ' && line[i] != '_'; ++i) {
      const char m = line[i];
      if (merging && m == '-') out.mods |= mod_exclude;
      else if (merging && m == '+') out.mods |= mod_include;
      else if (merging && m == 'C') out.mods |= mod_cvs | mod_no_inherit | mod_words | mod_exclude;
      else if (merging && m == 'e') out.mods |= mod_self;
      else if (merging && m == 'n') out.mods |= mod_no_inherit;
      else if (merging && m == 'w') out.mods |= mod_words;
      else if (!merging && out.kind != kind_clear && m == '!') out.mods |= mod_negate;
      else return false;
    }
    if ((out.mods & mod_exclude) && (out.mods & mod_include)) return false;
    if (i < line.size()) ++i;  // the separator
    out.arg = line.substr(i);
    if (out.kind == kind_clear) return out.arg.empty();
    if (out.arg.empty()) {
      if (out.kind == kind_dir_merge && (out.mods & mod_cvs)) out.arg = ".cvsignore";
      else return false;
    }
    return true;
  }

  static rule merge_rule(std::string_view name, unsigned mods) {
    rule r;
    r.merge = true;
    r.mods = mods;
    r.pattern = std::string(name);
    return r;
  }

  template <class F>
  static void for_each_line(std::string_view text, F&& f) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty() && line.front() != '#' && line.front() != ';') f(line);
      pos = end + 1;
    }
  }

  static rule make_rule(bool include_it, std::string_view pat, bool negate = false) {
    rule r;
    r.include = include_it;
    r.negate = negate;
    if (pat.size() > 1 && pat.back() == '/') {
      r.dirs_only = true;
      pat.remove_suffix(1);
    }
    for (char c : pat)
      if (c == '/') ++r.slashes;
    if (!pat.empty() && pat.front() == '/') {
      r.anchored = true;
      pat.remove_prefix(1);
    }
    r.wild = pat.find_first_of("*?[") != std::string_view::npos;
    if (r.wild) {
      const auto two = pat.find("**");
      r.wild2 = two != std::string_view::npos;
      r.wild2_prefix = two == 0 && !r.anchored;
      r.wild3_suffix = pat.size() >= 3 && pat.substr(pat.size() - 3) == "***";
    }
    r.pattern = std::string(pat);
    return r;
  }

  filter& add(bool include_it, std::string_view pat, bool negate = false) {
    if (pat.empty()) return *this;
    rules_.push_back(make_rule(include_it, pat, negate));
    return changed();  // a context's slots point into rules_
  }

  // The text of the rule file `name` of `dir` parsed as the merge modifiers `mods` say, into
  // `out`; `merges` counts the single-instance merges read so far (nesting is bounded).
  void parse_file(std::string_view dir, std::string_view name, unsigned mods, rule_file& out, int& merges) const {
    const std::string text = shared_->load ? shared_->load(dir, name) : std::string();
    std::string where = std::string(dir);
    if (!where.empty()) where += '/';
    where += name;
    std::size_t lineno = 0;
    const auto bad = [&](std::string_view rule_text) {
      throw filter_error("Unknown filter rule: `" + std::string(rule_text) + "' (" + where + " line " +
                         std::to_string(lineno) + ")");
    };
    const auto one = [&](std::string_view token) {
      if (mods & (mod_exclude | mod_include)) {
        if (token == "!" && (mods & mod_cvs)) {
          out.rules.clear();
          out.cleared = true;
          return;
        }
        out.rules.push_back(make_rule((mods & mod_include) != 0, token));
        return;
      }
      parsed p;
      if (!parse_rule(token, p)) bad(token);
      switch (p.kind) {
        case kind_clear:
          out.rules.clear();
          out.cleared = true;
          break;
        case kind_include:
        case kind_exclude:
          if (!p.arg.empty()) out.rules.push_back(make_rule(p.kind == kind_include, p.arg, (p.mods & mod_negate) != 0));
          break;
        case kind_dir_merge:
          if (p.mods & mod_self) out.rules.push_back(make_rule(false, basename(p.arg)));
          out.rules.push_back(merge_rule(p.arg, p.mods));
          break;
        case kind_merge: {
          if (++merges > 32) throw filter_error("merge files nested too deep (" + where + " line " + std::to_string(lineno) + ")");
          if (p.mods & mod_self) out.rules.push_back(make_rule(false, basename(p.arg)));
          parse_file(dir, p.arg, p.mods, out, merges);
          break;
        }
      }
    };
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = std::string_view(text).substr(pos, end - pos);
      pos = end + 1;
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!(mods & mod_words)) {
        if (line.empty() || line.front() == '#' || line.front() == ';') continue;
        one(line);
        continue;
      }
      std::size_t i = 0;  // words: split on whitespace, a lone prefix joined with the next word
      const auto word = [&](std::size_t& k) {
        while (k < line.size() && std::isspace(static_cast<unsigned char>(line[k]))) ++k;
        const std::size_t b = k;
        while (k < line.size() && !std::isspace(static_cast<unsigned char>(line[k]))) ++k;
        return line.substr(b, k - b);
      };
      for (std::string_view w = word(i); !w.empty(); w = word(i)) {
        const bool prefix_only = !(mods & (mod_exclude | mod_include)) &&
                                 (w == "+" || w == "-" || w == "." || w == ":" || w == "include" || w == "exclude" ||
                                  w == "merge" || w == "dir-merge");
        if (prefix_only) {  // "- foo + bar": two rules
          const std::string_view next = word(i);
          if (!next.empty()) w = line.substr(static_cast<std::size_t>(w.data() - line.data()),
                                             static_cast<std::size_t>(next.data() + next.size() - w.data()));
        }
        one(w);
      }
    }
  }

  // The context of the directory `dir` (length+1 = `base`; the root: "" and 0) below `parent`.
  std::shared_ptr<const dir_ctx> build(const dir_ctx* parent, std::string_view dir, std::size_t base) const {
    auto ctx = std::make_shared<dir_ctx>();
    const auto active = [&](std::string_view name) {
      for (const slot& s : ctx->slots)
        if (s.merge->pattern == name) return true;
      return false;
    };
    if (parent) {
      ctx->slots.reserve(parent->slots.size());
      for (const slot& s : parent->slots) ctx->slots.push_back(slot{s.merge, s.owner, nullptr, s.inherit});
    } else {
      for (const rule& r : rules_)
        if (r.merge && !active(r.pattern)) ctx->slots.push_back(slot{&r, nullptr, nullptr, nullptr});
    }
    for (std::size_t i = 0; i < ctx->slots.size(); ++i) {
      const rule* m = ctx->slots[i].merge;
      auto file = std::make_shared<rule_file>();
      int merges = 0;
      parse_file(dir, m->pattern, m->mods, *file, merges);
      if (file->rules.empty() && !file->cleared) {
        ctx->slots[i].current = ctx->slots[i].inherit;
      } else {
        for (const rule& r : file->rules)  // dir-merge rules of the file start here
          if (r.merge && !active(r.pattern)) ctx->slots.push_back(slot{&r, file, nullptr, nullptr});
        auto l = std::make_shared<layer>();
        l->file = file;
        if (!file->cleared) l->up = ctx->slots[i].inherit;
        l->base = base;
        ctx->slots[i].current = std::move(l);
      }
      ctx->slots[i].inherit = (m->mods & mod_no_inherit) ? nullptr : ctx->slots[i].current;
    }
    return ctx;
  }

  // rsync's rule_matches(), for a path relative to the transfer root; `base`: the length of the
  // directory prefix anchored patterns start after.
  static bool matches(const rule& r, std::string_view rel, file_type type, std::size_t base) {
    const bool is_dir = type == file_type::directory;
    if (r.dirs_only && !is_dir) return false;
    if (rel.empty()) return false;
    if (r.anchored && base > 0) {  // anchored at a per-directory file's directory
      if (rel.size() <= base) return false;
      rel.remove_prefix(base);
    }
    std::string_view name = rel;
    if (r.slashes == 0 && !r.wild2) {
      const auto slash = name.rfind('/');
      if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
    }
    const auto whole = [&](std::string_view t) {
      return r.wild ? detail::wild_match(r.pattern, t) : t == r.pattern;
    };
    std::string buffer;  // only for the two forms that add a character
    std::string_view text = name;
    if (r.wild2_prefix || (is_dir && r.wild3_suffix)) {
      if (r.wild2_prefix) buffer += '/';
      buffer += name;
      if (is_dir && r.wild3_suffix) buffer += '/';
      text = buffer;
    }
    if (!r.anchored && r.slashes > 0 && !r.wild2) {  // the last slashes+1 components
      std::size_t need = r.slashes;
      std::size_t start = text.size();
      while (start > 0) {
        if (text[start - 1] == '/') {
          if (need == 0) break;
          --need;
        }
        --start;
      }
      if (need > 0) return false;
      return whole(text.substr(start));
    }
    if (!r.anchored && r.wild2 && !r.wild2_prefix) {  // from the start or after any '/'
      if (whole(text)) return true;
      for (std::size_t i = 0; i < text.size(); ++i)
        if (text[i] == '/' && whole(text.substr(i + 1))) return true;
      return false;
    }
    return whole(text);
  }

  // 1 included, 0 excluded, -1 no rule matched.
  int decide(const std::vector<rule>& rules, std::string_view rel, file_type type, const dir_ctx* ctx,
             std::size_t base, int depth) const {
    for (const rule& r : rules) {
      if (r.merge) {
        const slot* s = ctx && depth < 64 ? ctx->find(&r) : nullptr;  // a duplicate name: not active (rsync)
        if (!s) continue;
        for (const layer* l = s->current.get(); l; l = l->up.get()) {
          const int v = decide(l->file->rules, rel, type, ctx, l->base, depth + 1);
          if (v >= 0) return v;
        }
        continue;
      }
      if (matches(r, rel, type, base) != r.negate) return r.include ? 1 : 0;
    }
    return -1;
  }

  std::vector<rule> rules_;
  bool has_merge_ = false;
  std::shared_ptr<shared_state> shared_;
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


// [treesync.detail.glob] ------------------------------------------------------------------------

namespace detail {

// Matches a bracket expression starting at p[i] == '['.  Returns false through `valid` when the
// bracket is not closed (the '[' is then a literal).
inline bool glob_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                      std::vector<bool>& failed);

// `failed` remembers the (pattern, text) positions already known not to match, so a pattern with
// many stars costs O(pattern x text x text) instead of exponential backtracking; `depth` bounds
// the recursion (one level per star group) for absurd patterns.
inline bool glob_match_at(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                          std::vector<bool>& failed) {
  const std::size_t key = pi * (s.size() + 1) + si;
  if (failed[key]) return false;
  if (depth > 512) return false;
  const bool matched = glob_step(p, pi, s, si, depth, failed);
  if (!matched) failed[key] = true;
  return matched;
}

inline bool glob_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                      std::vector<bool>& failed) {
  while (pi < p.size()) {
    const char c = p[pi];
    if (c == '*') {
      std::size_t k = pi;
      while (k < p.size() && p[k] == '*') ++k;
      if (k - pi >= 2) {  // "**": any sequence, '/' included
        const bool starts_component = pi == 0 || p[pi - 1] == '/';
        if (starts_component && k < p.size() && p[k] == '/') {
          // "**/": zero or more whole directories
          if (glob_match_at(p, k + 1, s, si, depth + 1, failed)) return true;
          for (std::size_t j = si; j < s.size(); ++j)
            if (s[j] == '/' && glob_match_at(p, k + 1, s, j + 1, depth + 1, failed)) return true;
          return false;
        }
        for (std::size_t j = si; j <= s.size(); ++j)
          if (glob_match_at(p, k, s, j, depth + 1, failed)) return true;
        return false;
      }
      // "*": any sequence within one component
      if (k == p.size()) return s.find('/', si) == std::string_view::npos;
      for (std::size_t j = si;; ++j) {
        if (glob_match_at(p, k, s, j, depth + 1, failed)) return true;
        if (j == s.size() || s[j] == '/') return false;
      }
    }
    if (si == s.size()) return false;
    const auto sc = static_cast<unsigned char>(s[si]);
    if (c == '?') {
      if (sc == '/') return false;
      ++pi;
      ++si;
      continue;
    }
    if (c == '[') {
      bool valid = false;
      std::size_t next = pi;
      const bool m = sc != '/' && match_bracket(p, next, sc, valid);
      if (valid) {
        if (!m) return false;
        pi = next;
        ++si;
        continue;
      }
      // unterminated '[': a literal
    }
    char lit = c;
    if (c == '\\' && pi + 1 < p.size()) lit = p[++pi];
    if (lit != s[si]) return false;
    ++pi;
    ++si;
  }
  return si == s.size();
}

inline bool glob_match(std::string_view pattern, std::string_view text) {
  std::vector<bool> failed((pattern.size() + 1) * (text.size() + 1), false);
  return glob_match_at(pattern, 0, text, 0, 0, failed);
}

/// Does a relative link target, resolved from the link's directory, stay inside the tree?
inline bool link_stays_inside(std::string_view rel_link, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  // depth of the link's directory below the root
  std::size_t depth = 0;
  for (char ch : rel_link)
    if (ch == '/') ++depth;
  std::size_t pos = 0;
  while (pos <= target.size()) {
    std::size_t end = target.find('/', pos);
    if (end == std::string_view::npos) end = target.size();
    const std::string_view comp = target.substr(pos, end - pos);
    if (comp == "..") {
      if (depth == 0) return false;
      --depth;
    } else if (!comp.empty() && comp != ".") {
      ++depth;
    }
    pos = end + 1;
  }
  return true;
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_FILTER_HPP
