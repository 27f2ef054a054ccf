// treesync/detail/filter_syntax.hpp - filter's rules: rsync's syntax parsed, a rule matched
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of filter.hpp (treesync::filter is its public face); include <treesync/treesync.hpp>.
#ifndef TREESYNC_DETAIL_FILTER_SYNTAX_HPP
#define TREESYNC_DETAIL_FILTER_SYNTAX_HPP

#include "../core.hpp"
#include "glob.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace treesync {
inline namespace v0 {
namespace detail {

/// Calls `f(line)` for each line of a rule or exclude file's `text` (rsync's reading): a trailing
/// '\r' dropped (CRLF files), blank lines and lines starting with '#' or ';' skipped.
template <class F>
void for_each_rule_line(std::string_view text, F&& f) {
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

// A rule, and rsync's syntax for one (a line of a rule file, a --filter argument): the parsing.
class rule_syntax {
 protected:
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
};

// Whether a rule matches a path: rsync's rule_matches().
class rule_matcher : protected rule_syntax {
 protected:
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
};

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_FILTER_SYNTAX_HPP
