// treesync/detail/glob.hpp - pattern matching: treesync::glob's matcher and rsync's wildmatch
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of filter.hpp (treesync::glob, treesync::exclude, treesync::filter match through it);
// include <treesync/treesync.hpp>.
#ifndef TREESYNC_DETAIL_GLOB_HPP
#define TREESYNC_DETAIL_GLOB_HPP

#include <cctype>
#include <cstddef>
#include <string_view>
#include <vector>

namespace treesync {
inline namespace v0 {
namespace detail {

// [treesync.detail.glob] ------------------------------------------------------------------------
//
// Two matchers over a relative path ('/'-separated, no leading '/'), both linear in memory and
// polynomial in time whatever the pattern (a table of the positions known not to match):
//  - glob_match: treesync::glob's and treesync::exclude's patterns (`**/` also matches zero
//    directories; brackets without POSIX classes);
//  - wild_match: rsync's wildmatch, for treesync::filter's rules.

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

// glob_match's matcher from pattern position `pi` and text position `si` (declared here: it and
// glob_match_at call each other).
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

// ---- paths ---------------------------------------------------------------------------------------

/// Does a relative link target, resolved from the link's directory, stay inside the tree?  rsync
/// 3.5's rule (its --safe-links and --copy-unsafe-links): an absolute or empty target does not, nor
/// one that climbs above the root; and, whatever the depth, neither does one with a `..` after any
/// other component (`a/../x`, `./../x`: `a` may be a link, to `..` say, and then `a/..` is not
/// where it reads) nor one ending in `/..` (`../..`, `x/..`).  Leading `..` components are counted.
inline bool link_stays_inside(std::string_view rel_link, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  if (target.size() > 3 && target.substr(target.size() - 3) == "/..") return false;
  // depth of the link's directory below the root
  std::size_t depth = 0;
  for (char ch : rel_link)
    if (ch == '/') ++depth;
  bool named = false;  // a component other than `..` seen: a `..` after it is refused
  std::size_t pos = 0;
  while (pos <= target.size()) {
    std::size_t end = target.find('/', pos);
    if (end == std::string_view::npos) end = target.size();
    const std::string_view comp = target.substr(pos, end - pos);
    if (comp == "..") {
      if (named || depth == 0) return false;
      --depth;
    } else if (!comp.empty()) {
      named = true;
      if (comp != ".") ++depth;
    }
    pos = end + 1;
  }
  return true;
}

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_GLOB_HPP
