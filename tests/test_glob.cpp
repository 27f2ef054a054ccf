// The glob matcher ([treesync.detail.glob]), treesync::glob / treesync::exclude ([treesync.policy.exclude]),
// treesync::escape and detail::link_stays_inside.
//
// Every TEST_CASE pins one behaviour as a table of rows; a failing row is named by CAPTURE
// (pattern, text, type, expected).
#include <doctest/doctest.h>

#include <treesync/treesync.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace {

using treesync::file_type;

// One row: does `pattern` match `text` (seen as an entry of `type`)?
struct row {
  const char* pattern;
  const char* text;
  bool expected;
  file_type type = file_type::regular;
};

const char* type_name(file_type t) { return treesync::to_string(t); }

// The raw matcher: the whole pattern against the whole text, no anchoring rules.
template <std::size_t N>
void check_raw(const row (&rows)[N]) {
  for (const row& r : rows) {
    const std::string pattern = r.pattern;
    const std::string text = r.text;
    const bool expected = r.expected;
    CAPTURE(pattern);
    CAPTURE(text);
    CAPTURE(expected);
    CHECK(treesync::detail::glob_match(pattern, text) == expected);
  }
}

// treesync::glob: the pattern with its rsync/gitignore rules (anchoring, trailing '/').
template <std::size_t N>
void check_glob(const row (&rows)[N]) {
  for (const row& r : rows) {
    const std::string pattern = r.pattern;
    const std::string rel = r.text;
    const std::string type = type_name(r.type);
    const bool expected = r.expected;
    CAPTURE(pattern);
    CAPTURE(rel);
    CAPTURE(type);
    CAPTURE(expected);
    CHECK(treesync::glob(pattern).matches(rel, r.type) == expected);
  }
}

}  // namespace

// ---- the matcher --------------------------------------------------------------------------------

TEST_CASE("glob: '*' matches any run of characters, including none, within one component") {
  const row rows[] = {
      {"*", "", true},          {"*", "abc", true},         {"*.h", "a.h", true},
      {"*.h", ".h", true},      {"*.h", "a.hpp", false},    {"*.h", "a.c", false},
      {"a*", "a", true},        {"a*", "abc", true},        {"a*", "ba", false},
      {"a*c", "ac", true},      {"a*c", "abbbc", true},     {"a*c", "abcd", false},
      {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxcyyb", false}, {"*x*", "abxcd", true},
      {"**x", "x", true},       {"*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '*' never crosses '/'") {
  const row rows[] = {
      {"*", "a/b", false},     {"a*", "a/b", false},   {"*b", "a/b", false},   {"a*b", "a/b", false},
      {"*/b", "a/b", true},    {"*/b", "a/x/b", false}, {"a/*", "a/b", true},   {"a/*", "a/b/c", false},
      {"a/*/c", "a/b/c", true}, {"a/*/c", "a/c", false}, {"*.txt", "d/x.txt", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '?' matches exactly one character, never '/'") {
  const row rows[] = {
      {"?", "a", true},      {"?", "", false},       {"?", "ab", false},    {"a?c", "abc", true},
      {"a?c", "ac", false},  {"a?c", "abbc", false}, {"a?c", "a/c", false}, {"??", "ab", true},
      {"?.h", "x.h", true},  {"?.h", "xy.h", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '[a-z]' matches one character of a range or set") {
  const row rows[] = {
      {"[a-z]", "a", true},       {"[a-z]", "m", true},         {"[a-z]", "z", true},
      {"[a-z]", "A", false},      {"[a-z]", "0", false},        {"[a-z]", "", false},
      {"[a-z]", "ab", false},     {"[abc]", "b", true},         {"[abc]", "d", false},
      {"[a-cx-z]", "y", true},    {"[a-cx-z]", "m", false},     {"f[0-9].o", "f7.o", true},
      {"f[0-9].o", "fx.o", false}, {"[a-]", "-", true},          {"[a-]", "a", true},
      {"[a-]", "b", false},       {"[a-z]", "/", false},        {"x[a-z]y", "x/y", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '[!x]' matches one character not in the set") {
  const row rows[] = {
      {"[!x]", "a", true},   {"[!x]", "x", false},     {"[!x]", "", false},   {"[!a-c]", "d", true},
      {"[!a-c]", "b", false}, {"a[!b]c", "axc", true}, {"a[!b]c", "abc", false},
      {"a[!b]c", "a/c", false},  // a negated set still never matches '/'
  };
  check_raw(rows);
}

TEST_CASE("glob: '[^x]' is the same negation as '[!x]'") {
  const row rows[] = {
      {"[^x]", "a", true},    {"[^x]", "x", false},    {"[^a-c]", "d", true},
      {"[^a-c]", "b", false}, {"a[^b]c", "a/c", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: ']' right after '[' (or '[!') is a member of the set") {
  const row rows[] = {
      {"[]]", "]", true},     {"[]]", "a", false},  {"[]a]", "a", true},  {"[]a]", "]", true},
      {"[]a]", "b", false},   {"[!]]", "]", false}, {"[!]]", "a", true},  {"x[]]y", "x]y", true},
  };
  check_raw(rows);
}

TEST_CASE("glob: an unterminated '[' is a literal character") {
  const row rows[] = {
      {"[", "[", true},     {"[", "a", false},   {"[abc", "[abc", true}, {"[abc", "a", false},
      {"a[b", "a[b", true}, {"a[b", "ab", false}, {"[!", "[!", true},    {"*[", "xx[", true},
  };
  check_raw(rows);
}

TEST_CASE("glob: a backslash makes the next character literal") {
  const row rows[] = {
      {"\\*", "*", true},        {"\\*", "a", false},        {"\\*", "", false},
      {"a\\*b", "a*b", true},    {"a\\*b", "axb", false},    {"\\?", "?", true},
      {"\\?", "a", false},       {"\\[a]", "[a]", true},     {"\\[a]", "a", false},
      {"\\\\", "\\", true},      {"\\a", "a", true},         {"[\\]]", "]", true},
      {"[\\]]", "\\", false},    {"*\\*", "abc*", true},     {"*\\*", "abc", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '**' spans directories") {
  const row rows[] = {
      {"**", "a", true},          {"**", "a/b/c", true},          {"a/**", "a/b", true},
      {"a/**", "a/b/c/d", true},  {"a/**", "b/c", false},         {"**.h", "x/y/z.h", true},
      {"**.h", "x/y/z.c", false}, {"a**z", "a/b/z", true},        {"a**z", "a/b/y", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: '**/x' matches x at the root and at any depth") {
  const row rows[] = {
      {"**/x", "x", true},     {"**/x", "a/x", true},   {"**/x", "a/b/c/x", true},
      {"**/x", "ax", false},   {"**/x", "a/xy", false}, {"**/x", "x/a", false},
      {"**/*.o", "m.o", true}, {"**/*.o", "d/e/m.o", true},
  };
  check_raw(rows);
}

TEST_CASE("glob: 'a/**/b' matches a/b, a/x/b and a/x/y/b") {
  const row rows[] = {
      {"a/**/b", "a/b", true},     {"a/**/b", "a/x/b", true}, {"a/**/b", "a/x/y/b", true},
      {"a/**/b", "a/x/y/z/b", true}, {"a/**/b", "ab", false},   {"a/**/b", "a/xb", false},
      {"a/**/b", "x/a/b", false},  {"a/**/b", "a/b/c", false}, {"a/**/b", "a/bb", false},
  };
  check_raw(rows);
}

TEST_CASE("glob: many stars against a long name are matched correctly (and, memoized, quickly: no timing assertion)") {
  // A backtracking matcher needs seconds to minutes here (every split of the name is retried).
  std::string stars;
  for (int i = 0; i < 10; ++i) stars += "*a";
  stars += "b";
  CHECK_FALSE(treesync::detail::glob_match(stars, std::string(40, 'a')));
  CHECK(treesync::detail::glob_match(stars, std::string(40, 'a') + "b"));

  std::string dirs;
  for (int i = 0; i < 12; ++i) dirs += "**/";
  dirs += "b";
  std::string path;
  for (int i = 0; i < 20; ++i) path += "a/";
  CHECK_FALSE(treesync::detail::glob_match(dirs, path + "c"));
  CHECK(treesync::detail::glob_match(dirs, path + "b"));
}

// ---- treesync::glob: anchoring and directory-only patterns -------------------------------------

TEST_CASE("glob: a pattern without '/' matches a name at any depth") {
  const row rows[] = {
      {"foo", "foo", true},         {"foo", "a/foo", true},    {"foo", "a/b/foo", true},
      {"foo", "foobar", false},     {"foo", "a/foo/bar", false}, {"foo", "afoo", false},
      {"*.o", "x.o", true},         {"*.o", "d/e/x.o", true},  {"*.o", "d.o/x", false},
  };
  check_glob(rows);
}

TEST_CASE("glob: a pattern with '/' is anchored at the root") {
  const row rows[] = {
      {"a/foo", "a/foo", true},  {"a/foo", "x/a/foo", false}, {"a/foo", "foo", false},
      {"a/*.o", "a/x.o", true},  {"a/*.o", "b/a/x.o", false}, {"a/*.o", "a/b/x.o", false},
  };
  check_glob(rows);
}

TEST_CASE("glob: a leading '/' anchors a single name at the root") {
  const row rows[] = {
      {"/foo", "foo", true}, {"/foo", "a/foo", false}, {"/*.o", "x.o", true}, {"/*.o", "d/x.o", false},
  };
  check_glob(rows);
  CHECK(treesync::glob("/foo").pattern() == "foo");
}

TEST_CASE("glob: a trailing '/' matches directories only") {
  const row rows[] = {
      {"build/", "build", true, file_type::directory},
      {"build/", "build", false, file_type::regular},
      {"build/", "build", false, file_type::symlink},
      {"build/", "a/build", true, file_type::directory},  // still unanchored: no other '/'
      {"build/", "a/build", false, file_type::regular},
      {"/build/", "a/build", false, file_type::directory},
      {"a/build/", "a/build", true, file_type::directory},
      {"a/build/", "x/a/build", false, file_type::directory},
      {"build", "build", true, file_type::regular},  // without the '/', any type
      {"build", "build", true, file_type::directory},
  };
  check_glob(rows);
  CHECK(treesync::glob("build/").pattern() == "build");
}

// ---- treesync::exclude -------------------------------------------------------------------------

TEST_CASE("exclude: an empty pattern is ignored") {
  const treesync::exclude e{""};
  CHECK(e.size() == 0u);
  CHECK_FALSE(e.excluded("", file_type::directory));
  CHECK_FALSE(e.excluded("a", file_type::regular));

  treesync::exclude f{"*.o"};
  f.add("");
  CHECK(f.size() == 1u);
  CHECK_FALSE(f.excluded("a", file_type::regular));
}

TEST_CASE("exclude: an entry is excluded when any of several patterns matches") {
  const treesync::exclude e{"*.pyc", "__pycache__/", "/build", "docs/*.tmp", ""};
  CHECK(e.size() == 4u);
  struct ex_row {
    const char* rel;
    file_type type;
    bool expected;
  };
  const ex_row rows[] = {
      {"m.pyc", file_type::regular, true},
      {"pkg/m.pyc", file_type::regular, true},
      {"pkg/m.py", file_type::regular, false},
      {"pkg/__pycache__", file_type::directory, true},
      {"pkg/__pycache__", file_type::regular, false},
      {"build", file_type::directory, true},
      {"build", file_type::regular, true},
      {"src/build", file_type::directory, false},
      {"docs/a.tmp", file_type::regular, true},
      {"docs/sub/a.tmp", file_type::regular, false},
      {"a.tmp", file_type::regular, false},
      {"README", file_type::regular, false},
  };
  for (const ex_row& r : rows) {
    const std::string rel = r.rel;
    const std::string type = type_name(r.type);
    const bool expected = r.expected;
    CAPTURE(rel);
    CAPTURE(type);
    CAPTURE(expected);
    CHECK(e.excluded(rel, r.type) == expected);
  }
}

TEST_CASE("exclude: built from a range of patterns") {
  const std::string patterns[] = {"*.o", "", "tmp/"};
  const treesync::exclude e(patterns);
  CHECK(e.size() == 2u);
  CHECK(e.excluded("a/b.o", file_type::regular));
  CHECK(e.excluded("x/tmp", file_type::directory));
  CHECK_FALSE(e.excluded("x/tmp", file_type::regular));
  CHECK_FALSE(e.excluded("b.c", file_type::regular));
}

// ---- treesync::escape --------------------------------------------------------------------------

TEST_CASE("escape: control characters, DEL and backslash are escaped; printable ASCII and UTF-8 are kept") {
  struct esc_row {
    std::string in;
    std::string out;
  };
  const esc_row rows[] = {
      {"plain.txt", "plain.txt"},
      {"a\nb", "a\\nb"},
      {"a\tb", "a\\tb"},
      {"a\rb", "a\\rb"},
      {"\x1b[31mred", "\\x1b[31mred"},
      {std::string("a\0b", 3), "a\\x00b"},
      {"\x01\x1f", "\\x01\\x1f"},
      {"del\x7f", "del\\x7f"},
      {"back\\slash", "back\\\\slash"},
      {"\\n", "\\\\n"},  // a literal backslash-n cannot pass for an escaped newline
      {"caf\xc3\xa9", "caf\xc3\xa9"},
      {"\xe6\x97\xa5\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac"},
      {"\xff\x80", "\xff\x80"},
      {" ~!", " ~!"},
      {"", ""},
  };
  for (const esc_row& r : rows) {
    const std::string& in = r.in;
    const std::string& expected = r.out;
    CAPTURE(in);
    CAPTURE(expected);
    CHECK(treesync::escape(in) == expected);
    CHECK(treesync::escape(in).find('\n') == std::string::npos);
  }
}

// ---- detail::link_stays_inside -----------------------------------------------------------------

TEST_CASE("link_stays_inside: a relative target resolved from the link's directory must stay in the tree") {
  struct link_row {
    const char* link;
    const char* target;
    bool inside;
  };
  const link_row rows[] = {
      {"l", "x", true},              // sibling at the root
      {"l", "d/x", true},            // down
      {"l", "./x", true},            // '.' components
      {"l", ".", true},              // the root itself
      {"d/l", "../x", true},         // up one, still inside
      {"d/e/l", "../../x", true},    // up to the root, still inside
      {"d/l", "..", true},           // the root itself, from below
      {"d/e/l", "../../", true},     // the root, with a trailing slash
      {"d/e/l", "..//../x", true},   // doubled slashes between leading '..'
      {"d/l", "x/../y", false},      // down, then up: rsync 3.5 refuses a '..' after a name
      {"l", "a/../x", false},        // (a may be a link: d/a -> .. makes d/l -> a/../../x leave)
      {"d/e/l", "./../x", false},    // after '.' too
      {"d/e/l", "../x/../y", false}, // after a name that follows leading '..'
      {"d/e/l", "../..", false},     // ending in '/..', however deep the link
      {"d/l", "x/..", false},
      {"l", "..", false},            // the root's parent
      {"l", "../x", false},          // up from the root
      {"d/l", "../../x", false},     // up past the root
      {"d/e/l", "../../../x", false},
      {"l", "x/../../y", false},     // leaves the tree in the middle
      {"d/l", "../d/../../x", false},
      {"l", "/etc/passwd", false},   // absolute
      {"d/l", "/", false},
      {"l", "", false},              // empty target
  };
  for (const link_row& r : rows) {
    const std::string link = r.link;
    const std::string target = r.target;
    const bool expected = r.inside;
    CAPTURE(link);
    CAPTURE(target);
    CAPTURE(expected);
    CHECK(treesync::detail::link_stays_inside(link, target) == expected);
  }
}
