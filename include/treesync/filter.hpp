// treesync/filter.hpp - exclusion: glob patterns, exclude lists, rsync filter rules, predicate combinators
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_FILTER_HPP
#define TREESYNC_FILTER_HPP

#include "policies.hpp"

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

 private:
  std::vector<glob> globs_;
};

namespace detail {

// rsync's wildmatch, over one string: `*` and `?` never match '/', a run of two or more stars
// matches anything ('/' included; unlike glob_match, `**/` does not also match zero directories),
// `[...]` with `!`/`^`, ranges, `\` escapes and the POSIX classes `[:alpha:]` etc.; `\` escapes.
inline bool wild_class(std::string_view p, std::size_t& i, unsigned char c, bool& valid) {
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
    if (p[j] == '[' && j + 1 < p.size() && p[j + 1] == ':') {
      const std::size_t end = p.find(":]", j + 2);
      if (end != std::string_view::npos) {
        const std::string_view name = p.substr(j + 2, end - j - 2);
        const int ci = static_cast<int>(c);
        bool in = false;
        if (name == "alnum") in = std::isalnum(ci) != 0;
        else if (name == "alpha") in = std::isalpha(ci) != 0;
        else if (name == "blank") in = c == ' ' || c == '\t';
        else if (name == "cntrl") in = std::iscntrl(ci) != 0;
        else if (name == "digit") in = c >= '0' && c <= '9';
        else if (name == "graph") in = std::isgraph(ci) != 0;
        else if (name == "lower") in = std::islower(ci) != 0;
        else if (name == "print") in = std::isprint(ci) != 0;
        else if (name == "punct") in = std::ispunct(ci) != 0;
        else if (name == "space") in = std::isspace(ci) != 0;
        else if (name == "upper") in = std::isupper(ci) != 0;
        else if (name == "xdigit") in = std::isxdigit(ci) != 0;
        else {  // an unknown class matches nothing and makes the whole pattern fail, as in rsync
          valid = true;
          i = p.size();
          return false;
        }
        if (in) matched = true;
        j = end + 2;
        continue;
      }
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
  i = j + 1;
  return matched != negate;
}

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
      const bool m = wild_class(p, next, sc, valid);
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
/// dir_merge rule, the deepest first, each holding rules in the syntax of add_rules() (a `!` in
/// one drops the rules inherited from above).  The files are read through the `loader` given at
/// construction: `filter::reading(root)` reads `root/DIR/NAME` with open(O_NOFOLLOW), regular
/// files only, at most 1 MiB (a missing, unreadable, oversized or non-regular file holds no
/// rules), each directory once per filter (a cache shared by copies, guarded by a mutex:
/// excluded() may be called from several worker threads at once).  Pass the run's source
/// directory as root; destination-only directories have no rule files.  Nested merge rules inside
/// a per-directory file are ignored.
class filter {
 public:
  /// Reads the per-directory file `name` of the directory `dir` (relative to the source, "" for
  /// the root); an empty result holds no rules.
  using loader = std::function<std::string(std::string_view dir, std::string_view name)>;

  filter() : shared_(std::make_shared<shared_state>()) {}
  explicit filter(loader load) : filter() { shared_->load = std::move(load); }

  /// A filter whose per-directory rule files are read from the directory `root`.
  static filter reading(std::filesystem::path root) {
    return filter([root = std::move(root)](std::string_view dir, std::string_view name) {
      std::filesystem::path p = root;
      if (!dir.empty()) p /= std::string(dir);
      p /= std::string(name);
      return read_rule_file(p.c_str());
    });
  }

  filter& include(std::string_view pattern) { return add(true, pattern); }
  filter& exclude(std::string_view pattern) { return add(false, pattern); }
  /// Per-directory rule files called `name` (rsync `dir-merge NAME`; `-F` is ".rsync-filter").
  filter& dir_merge(std::string_view name) {
    rule r;
    r.merge = true;
    r.pattern = std::string(name);
    rules_.push_back(std::move(r));
    return *this;
  }
  /// Drops every rule added so far (rsync's `!`).
  filter& clear() {
    rules_.clear();
    return *this;
  }

  /// One rule in rsync's --filter syntax: `+ PAT`, `- PAT`, `include PAT`, `exclude PAT`,
  /// `dir-merge NAME`, `: NAME`, `!` (clear).  Returns false (and adds nothing) on anything else,
  /// rule modifiers included.
  bool add_rule(std::string_view line) {
    std::string_view word = line, rest;
    const auto sp = line.find_first_of(" _");
    if (sp != std::string_view::npos) {
      word = line.substr(0, sp);
      rest = line.substr(sp + 1);
    }
    if (word == "!" || word == "clear") {
      if (!rest.empty()) return false;
      clear();
      return true;
    }
    if (sp == std::string_view::npos || rest.empty()) return false;
    if (word == "+" || word == "include") return include(rest), true;
    if (word == "-" || word == "exclude") return exclude(rest), true;
    if (word == ":" || word == "dir-merge") return dir_merge(rest), true;
    return false;
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
    const int v = decide(rules_, rel, type, true);
    return v == 0;
  }

  std::size_t size() const noexcept { return rules_.size(); }
  bool empty() const noexcept { return rules_.empty(); }

  /// The regular file at `path` (no symlink followed at its last component), at most 1 MiB;
  /// empty when it is missing, not a regular file, unreadable or larger.
  static std::string read_rule_file(const char* path) {
    std::string out;
    const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return out;
    struct stat st;
    constexpr off_t cap = off_t{1} << 20;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= cap) {
      char buf[8192];
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          if (n < 0) out.clear();
          break;
        }
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > static_cast<std::size_t>(cap)) {
          out.clear();
          break;
        }
      }
    }
    ::close(fd);
    return out;
  }

 private:
  struct rule {
    std::string pattern;  // without the leading '/' of an anchored pattern and the trailing '/'
    std::string base;     // a per-directory file's directory + '/', for anchored patterns
    bool include = false;
    bool merge = false;
    bool anchored = false;
    bool dirs_only = false;
    bool wild = false;    // holds '*', '?' or '['
    bool wild2 = false;   // holds "**"
    bool wild2_prefix = false;
    bool wild3_suffix = false;
    std::size_t slashes = 0;  // '/' in the pattern, the leading one counted, the trailing one not
  };
  struct dir_rules {
    std::vector<rule> rules;
    bool cleared = false;  // held a '!': the rules of the directories above do not apply
  };
  struct shared_state {
    loader load;
    std::mutex mu;
    std::map<std::string, std::shared_ptr<const dir_rules>, std::less<>> cache;
  };

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

  static rule make_rule(bool include_it, std::string_view pat) {
    rule r;
    r.include = include_it;
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

  filter& add(bool include_it, std::string_view pat) {
    if (!pat.empty()) rules_.push_back(make_rule(include_it, pat));
    return *this;
  }

  // rsync's rule_matches(), for a path relative to the transfer root.
  static bool matches(const rule& r, std::string_view rel, file_type type) {
    const bool is_dir = type == file_type::directory;
    if (r.dirs_only && !is_dir) return false;
    if (rel.empty()) return false;
    if (r.anchored && !r.base.empty()) {  // anchored at a per-directory file's directory
      if (rel.size() <= r.base.size() || rel.compare(0, r.base.size(), r.base) != 0) return false;
      rel.remove_prefix(r.base.size());
    }
    std::string_view name = rel;
    if (r.slashes == 0 && !r.wild2) {
      const auto slash = name.rfind('/');
      if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
    }
    std::string text;
    if (r.wild2_prefix) text += '/';
    text += name;
    if (is_dir && r.wild3_suffix) text += '/';
    const auto whole = [&](std::string_view t) {
      return r.wild ? detail::wild_match(r.pattern, t) : t == r.pattern;
    };
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
      return whole(std::string_view(text).substr(start));
    }
    if (!r.anchored && r.wild2 && !r.wild2_prefix) {  // from the start or after any '/'
      const std::string_view t = text;
      if (whole(t)) return true;
      for (std::size_t i = 0; i < t.size(); ++i)
        if (t[i] == '/' && whole(t.substr(i + 1))) return true;
      return false;
    }
    return whole(text);
  }

  // 1 included, 0 excluded, -1 no rule matched.
  int decide(const std::vector<rule>& rules, std::string_view rel, file_type type, bool outer) const {
    for (const rule& r : rules) {
      if (r.merge) {
        if (!outer) continue;
        std::string_view dir = rel;
        for (;;) {
          const auto slash = dir.rfind('/');
          dir = slash == std::string_view::npos ? std::string_view() : dir.substr(0, slash);
          const auto d = per_dir(dir, r.pattern);
          if (d) {
            const int v = decide(d->rules, rel, type, false);
            if (v >= 0) return v;
            if (d->cleared) break;
          }
          if (dir.empty()) break;
        }
        continue;
      }
      if (matches(r, rel, type)) return r.include ? 1 : 0;
    }
    return -1;
  }

  std::shared_ptr<const dir_rules> per_dir(std::string_view dir, const std::string& name) const {
    if (!shared_->load) return nullptr;
    std::string key(dir);
    key += '\0';
    key += name;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      const auto it = shared_->cache.find(key);
      if (it != shared_->cache.end()) return it->second;
    }
    const std::string text = shared_->load(dir, name);  // outside the lock: workers read in parallel
    std::shared_ptr<dir_rules> d;
    if (!text.empty()) {
      filter f;
      for_each_line(text, [&](std::string_view line) {
        if (line == "!" || line == "clear") {
          f.rules_.clear();
          if (!d) d = std::make_shared<dir_rules>();
          d->cleared = true;
        } else {
          f.add_rule(line);
        }
      });
      if (!d) d = std::make_shared<dir_rules>();
      d->rules = std::move(f.rules_);
      for (rule& r : d->rules)
        if (r.anchored && !dir.empty()) r.base = std::string(dir) + '/';
    }
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->cache.emplace(std::move(key), std::move(d)).first->second;
  }

  std::vector<rule> rules_;
  std::shared_ptr<shared_state> shared_;
};

/// Excludes nothing (the default).
struct exclude_nothing_t {
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
inline bool match_bracket(std::string_view p, std::size_t& i, unsigned char c, bool& valid) {
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
