// DST's per-directory rule files read up front (treesync/detail/dst_rules.hpp, issue 33 item 3):
// the tree of directories they are recorded in (a lookup by path, an unread directory keeping
// its subtree, the budget), and the read itself on real directories: memory linear in the depth
// of a chain (counted by the structure and its walk, never timed), and a chain deeper than the
// descriptors the process may open read to the bottom.  And (issue 45 item 3) the files DST's
// rule files merge: read only when whoever could write the rule file may read them (over mock_fs,
// and over real files as root), a missing one refused as an unreadable one is.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/deep_tree.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace {

using treesync::detail::dst_rule_texts;
using treesync::detail::read_dst_rule_tree;
using treesync::detail::read_dst_merge_file;
using treesync::filter;
using treesync::mock_fs;
using namespace treesync_test;

const std::string rf = ".rsync-filter";

std::string text_of(const dst_rule_texts& t, std::string_view dir, std::string_view name = rf) {
  const std::string* s = t.find(dir, name);
  return s ? *s : std::string("<none>");
}

// `depth` directories "d" below `root`, with `rule` as the rule file of each level i (1 = the
// first "d") for which `at(i)` holds; returns false on failure.
template <class At>
bool chain_with_rules(const std::string& root, int depth, const std::string& rule, At at,
                      const std::string& name = "d") {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 1; fd >= 0 && i <= depth; ++i) {
    ::mkdirat(fd, name.c_str(), 0755);
    const int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = next;
    if (fd >= 0 && at(i)) {
      const int f = ::openat(fd, rf.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const bool ok = f >= 0 && ::write(f, rule.data(), rule.size()) == static_cast<ssize_t>(rule.size());
      if (f >= 0) ::close(f);
      if (!ok) {
        ::close(fd);
        return false;
      }
    }
  }
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string chain_path(int levels, const std::string& name = "d") {
  std::string p;
  for (int i = 0; i < levels; ++i) p += (i ? "/" : "") + name;
  return p;
}

void read_tree(const std::string& root, dst_rule_texts& out, std::size_t window = treesync::detail::dst_rule_window) {
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  read_dst_rule_tree(fd, "", {rf}, out, window);
  ::close(fd);
}

}  // namespace

TEST_CASE("dst_rule_texts: a rule file is found by its directory's path, at any depth, and nowhere else") {
  dst_rule_texts t(1 << 20);
  REQUIRE(t.keep("a/b/c", rf, "- x"));
  REQUIRE(t.keep("", rf, "- top"));
  REQUIRE(t.keep("a/b/c", ".other", "- y"));
  CHECK(text_of(t, "a/b/c") == "- x");
  CHECK(text_of(t, "a/b/c", ".other") == "- y");
  CHECK(text_of(t, "") == "- top");
  CHECK(text_of(t, "a/b") == "<none>");
  CHECK(text_of(t, "a/b/c/d") == "<none>");
  CHECK(text_of(t, "a/b/cc") == "<none>");
  CHECK(text_of(t, "x/b/c") == "<none>");
  CHECK(text_of(t, "a/b/c", ".third") == "<none>");
  CHECK(t.size() == 3);
  REQUIRE(t.keep("a/b/c", rf, "- again"));  // the same file again: replaced, not added
  CHECK(text_of(t, "a/b/c") == "- again");
  CHECK(t.size() == 3);
}

TEST_CASE("dst_rule_texts: a lookup resumed where the last one ended finds what one from the root does") {
  // issue 45 item 5: the loader looked each level of a deep DST up from the root (a 20,000-level
  // chain: 2 x 10^8 hash lookups); a place kept per thread resumes below the last directory
  dst_rule_texts t(1 << 20);
  REQUIRE(t.keep("", rf, "- 0"));
  REQUIRE(t.keep("a", rf, "- 1"));
  REQUIRE(t.keep("a/b/c", rf, "- 3"));
  REQUIRE(t.keep("a/b/c/d", ".other", "- 4"));
  REQUIRE(t.keep_unread("a/x"));
  REQUIRE(t.keep("a/bc", rf, "- bc"));
  dst_rule_texts::place p;
  for (const char* dir : {"", "a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e", "a/b/c", "a/x/y", "a/x/y/z", "a/bc",
                          "a/b/c/d", "a/b//c", "b", "a"}) {
    for (const std::string& name : {rf, std::string(".other")}) {
      CAPTURE(dir);
      CAPTURE(name);
      const auto fresh = t.lookup(dir, name);
      const auto resumed = t.lookup(dir, name, &p);
      CHECK(fresh.text == resumed.text);
      CHECK(fresh.below_unread == resumed.below_unread);
    }
  }
  t.lookup("a/b/c/d", rf, &p);
  CHECK(p.dir == "a/b/c/d");  // where the next lookup below it starts
  t.lookup("a/b/c/d/e/f", rf, &p);
  CHECK(p.dir == "a/b/c/d");  // no node below d: the place stays
}

TEST_CASE("dst_rule_texts: a directory not read keeps its whole subtree, and only it") {
  dst_rule_texts t(1 << 20);
  CHECK_FALSE(t.below_unread(""));
  REQUIRE(t.keep_unread("a/b"));
  CHECK(t.below_unread("a/b"));
  CHECK(t.below_unread("a/b/c/d/e"));
  CHECK_FALSE(t.below_unread("a"));
  CHECK_FALSE(t.below_unread("a/bc"));
  CHECK_FALSE(t.below_unread("a/c/b"));
  CHECK_FALSE(t.below_unread(""));
  const auto found = t.lookup("a/b/c", rf);
  CHECK(found.below_unread);
  CHECK(found.text == nullptr);
  REQUIRE(t.keep_unread(""));  // the root itself: everything
  CHECK(t.below_unread(""));
  CHECK(t.below_unread("z/y"));
}

TEST_CASE("dst_rule_texts: past the budget nothing more is recorded and it says it is full") {
  dst_rule_texts t(dst_rule_texts::node_cost + 1 + dst_rule_texts::file_cost + rf.size() + 10);
  REQUIRE(t.keep("a", rf, std::string(10, 'x')));  // exactly the budget
  CHECK_FALSE(t.full);
  CHECK(t.bytes == t.budget);
  CHECK_FALSE(t.keep("a", ".other", "y"));
  CHECK(t.full);
  CHECK_FALSE(t.keep("a", rf, "z"));  // once full, nothing more (not even a replacement)
  CHECK_FALSE(t.keep_unread("b/c"));
  CHECK(text_of(t, "a") == std::string(10, 'x'));
  CHECK(t.bytes <= t.budget);
}

TEST_CASE("dst_rule_texts: each rule file is visited once, a directory before those below it, names in order") {
  dst_rule_texts t(1 << 20);
  REQUIRE(t.keep("b/x", rf, "3"));
  REQUIRE(t.keep("a", rf, "1"));
  REQUIRE(t.keep("b", rf, "2"));
  REQUIRE(t.keep("", ".z", "0z"));
  REQUIRE(t.keep("", ".a", "0a"));
  REQUIRE(t.keep_unread("c"));
  std::vector<std::tuple<std::string, std::string, std::string>> seen;
  t.for_each_file([&](const std::string& dir, const std::string& name, const std::string& text) {
    seen.emplace_back(dir, name, text);
  });
  const std::vector<std::tuple<std::string, std::string, std::string>> want = {
      {"", ".a", "0a"}, {"", ".z", "0z"}, {"a", rf, "1"}, {"b", rf, "2"}, {"b/x", rf, "3"}};
  CHECK(seen == want);
}

TEST_CASE("read_dst_rule_tree: each directory's rule files under their paths; a symlinked one keeps all") {
  temp_dir tmp;
  const fs::path r = tmp.path();
  make_dir(r / "a");
  make_dir(r / "a" / "b");
  make_dir(r / "a" / "b" / "c");
  make_dir(r / "e");
  write_file(r / rf, "- top\n");
  write_file(r / "a" / "b" / "c" / rf, "- deep\n");
  make_symlink("/etc/passwd", r / "e" / rf);
  make_symlink("a", r / "link");  // a symlink to a directory is not entered
  dst_rule_texts t(1 << 20);
  read_tree(r.string(), t);
  CHECK(text_of(t, "") == "- top\n");
  CHECK(text_of(t, "a/b/c") == "- deep\n");
  CHECK(text_of(t, "e") == "- *");
  CHECK(text_of(t, "a") == "<none>");
  CHECK(text_of(t, "link/b/c") == "<none>");
  CHECK_FALSE(t.below_unread("a/b/c"));
  CHECK(t.size() == 3);
  CHECK_FALSE(t.full);
  CHECK_FALSE(t.out_of_descriptors);
}

TEST_CASE("read_dst_rule_tree: each directory read is recorded with its device and inode, one without rule files too") {
  temp_dir tmp;
  const fs::path r = tmp.path();
  make_dir(r / "a");
  make_dir(r / "a" / "b");
  write_file(r / "a" / rf, "- x\n");
  make_symlink("a", r / "link");
  dst_rule_texts t(1 << 20);
  read_tree(r.string(), t);
  const auto same = [&](std::string_view dir, const fs::path& p) {
    struct stat st;
    REQUIRE(::stat(p.c_str(), &st) == 0);
    const auto found = t.lookup(dir, std::string_view());
    return found.seen && found.dev == static_cast<std::uint64_t>(st.st_dev) &&
           found.ino == static_cast<std::uint64_t>(st.st_ino);
  };
  CHECK(same("", r));
  CHECK(same("a", r / "a"));
  CHECK(same("a/b", r / "a" / "b"));  // no rule file of its own: recorded all the same
  CHECK_FALSE(t.lookup("link", std::string_view()).seen);  // a symlink is not entered
  CHECK_FALSE(t.lookup("missing", std::string_view()).seen);
}

TEST_CASE("read_dst_rule_tree: past the budget a directory not recorded is not seen, and it says it is full") {
  temp_dir tmp;
  const fs::path r = tmp.path();
  for (int i = 0; i < 50; ++i) make_dir(r / ("dir" + std::to_string(i)));
  dst_rule_texts t(10 * dst_rule_texts::node_cost);
  read_tree(r.string(), t);
  CHECK(t.full);
  int seen = 0;
  for (int i = 0; i < 50; ++i) seen += t.lookup("dir" + std::to_string(i), std::string_view()).seen ? 1 : 0;
  CHECK(seen < 10);
  CHECK(t.bytes <= t.budget);
}

TEST_CASE("read_dst_rule_tree: a directory it cannot enter is recorded as unread, its siblings read") {
  if (::geteuid() == 0) return;  // root enters a mode-000 directory
  temp_dir tmp;
  const fs::path r = tmp.path();
  make_dir(r / "locked");
  make_dir(r / "locked" / "in");
  make_dir(r / "open");
  write_file(r / "open" / rf, "- o\n");
  set_mode(r / "locked", 0);
  dst_rule_texts t(1 << 20);
  read_tree(r.string(), t);
  set_mode(r / "locked", 0755);
  CHECK(t.below_unread("locked"));
  CHECK(t.below_unread("locked/in"));
  CHECK_FALSE(t.below_unread("open"));
  CHECK_FALSE(t.below_unread(""));
  CHECK(text_of(t, "open") == "- o\n");
}

TEST_CASE("read_dst_rule_tree: a 2,000-level chain costs memory linear in its depth") {
  deep_scratch s("dst-rules-chain");
  REQUIRE_FALSE(s.path.empty());
  constexpr int depth = 2000;
  const std::string name(100, 'n');  // a path of the whole depth is 200 KB: one per level would be 200 MB
  REQUIRE(chain_with_rules(s.path, depth, "- x\n", [](int i) { return i % 10 == 0; }, name));
  dst_rule_texts t(std::size_t{64} << 20);
  read_tree(s.path, t);
  CHECK(t.size() == depth / 10);
  CHECK(text_of(t, chain_path(depth, name)) == "- x\n");
  CHECK(text_of(t, chain_path(depth - 1, name)) == "<none>");
  CHECK_FALSE(t.below_unread(chain_path(depth, name)));
  CHECK_FALSE(t.out_of_descriptors);
  // a node per level (its own name, never a path) and a file per tenth level
  CHECK(t.nodes() == depth + 1);
  const std::size_t per_level = dst_rule_texts::node_cost + name.size();
  const std::size_t per_file = dst_rule_texts::file_cost + rf.size() + 4;
  CHECK(t.bytes == depth * per_level + (depth / 10) * per_file);
  // the walk: a level's record and its subdirectory's name, the same at any depth
  CHECK(t.walk_peak > 0);
  CHECK(t.walk_peak <= depth * std::size_t{512});
}

TEST_CASE("read_dst_rule_tree: a chain deeper than the descriptors the process may open is read to the bottom") {
  deep_scratch s("dst-rules-fds");
  REQUIRE_FALSE(s.path.empty());
  constexpr int depth = 300;
  REQUIRE(chain_with_rules(s.path, depth, "- bottom\n", [](int i) { return i == depth || i == 150; }));
  // siblings "a" and "z" made before and after "d" in each of the first 40 levels: whatever order
  // the directory lists them in, one of them is left when the walk comes back up from the bottom,
  // to levels that fell out of the window (reopened)
  int fd = ::open(s.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const auto sibling = [&](const char* n) {
    ::mkdirat(fd, n, 0755);
    const int f = ::openat(fd, (std::string(n) + "/" + rf).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    const bool ok = f >= 0 && ::write(f, "- s\n", 4) == 4;
    if (f >= 0) ::close(f);
    return ok;
  };
  for (int i = 0; i < 40; ++i) {
    REQUIRE(::renameat(fd, "d", fd, "d-moved") == 0);  // "a", then "d", then "z"
    REQUIRE(sibling("a"));
    REQUIRE(::renameat(fd, "d-moved", fd, "d") == 0);
    REQUIRE(sibling("z"));
    const int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = next;
    REQUIRE(fd >= 0);
  }
  ::close(fd);
  dst_rule_texts t(std::size_t{64} << 20);
  {
    fd_limit limit(64);  // one descriptor per level would run out some 50 levels down
    read_tree(s.path, t, 4);
  }
  CHECK_FALSE(t.out_of_descriptors);
  CHECK(text_of(t, chain_path(depth)) == "- bottom\n");
  CHECK(text_of(t, chain_path(150)) == "- bottom\n");
  CHECK_FALSE(t.below_unread(chain_path(depth)));
  for (int i = 0; i < 40; ++i) {
    CHECK(text_of(t, chain_path(i) + (i ? "/a" : "a")) == "- s\n");
    CHECK(text_of(t, chain_path(i) + (i ? "/z" : "z")) == "- s\n");
  }
  CHECK(t.size() == 82);
  CHECK(t.reopened > 0);  // levels that fell out of the window were reopened through ".."
}

TEST_CASE("read_dst_rule_tree: past the descriptors it may open, what is below is unread and it says so") {
  deep_scratch s("dst-rules-emfile");
  REQUIRE_FALSE(s.path.empty());
  constexpr int depth = 300;
  REQUIRE(chain_with_rules(s.path, depth, "- bottom\n", [](int i) { return i == depth; }));
  dst_rule_texts t(std::size_t{64} << 20);
  {
    fd_limit limit(128);  // fewer than 300 descriptors: a window as deep as the chain runs out
    read_tree(s.path, t, 1000);
  }
  CHECK(t.out_of_descriptors);
  CHECK(t.below_unread(chain_path(depth)));  // kept: nothing there is deleted
  CHECK(text_of(t, chain_path(depth)) == "<none>");
  CHECK_FALSE(t.below_unread(chain_path(10)));
}

// ---- the files DST's rule files merge (issue 45 item 3) ----------------------------------------

namespace {

constexpr std::uint32_t nobody = 65534;  // DST's owner, who writes its rule files
constexpr std::uint32_t other = 4242;

// DST's filter as the CLI makes it: `.rsync-filter` per directory, what they merge read through
// read_dst_merge_file below DST's handle.
template <class Fs>
filter dst_filter(Fs& fs, typename Fs::dir_handle& dst, const std::string& dst_path) {
  filter f([&fs, &dst, dst_path](std::string_view dir, std::string_view name) -> std::string {
    if (name == rf) {
      std::string p = dst_path;
      if (!dir.empty()) p += "/" + std::string(dir);
      p += "/" + rf;
      if constexpr (std::is_same_v<Fs, mock_fs>)
        return fs.exists(p) ? fs.read(p) : std::string();
      else
        return filter::read_rule_file(p.c_str());
    }
    return read_dst_merge_file(fs, dst, dir, name);
  });
  f.dir_merge(rf);
  return f;
}

// What DST's filter says of `rel`: "excluded", "kept" or the filter_error's message.
template <class Fs>
std::string verdict(Fs& fs, const std::string& dst_path, const std::string& rel) {
  std::error_code ec;
  auto dst = fs.open_root(dst_path, ec);
  REQUIRE(!ec);
  const filter f = dst_filter(fs, dst, dst_path);
  try {
    return f.excluded(rel, treesync::file_type::regular) ? "excluded" : "kept";
  } catch (const treesync::filter_error& e) {
    return e.what();
  }
}

// The finding: root mirrored a 0700 priv/ holding a 0600 secret into nobody's DST; nobody's rule
// file merges it.
void nobody_dst(mock_fs& fs, const std::string& rule) {
  fs.mkdir("/dst");
  fs.chown("/dst", nobody, nobody);
  fs.mkdir("/dst/priv", 0700);
  fs.write("/dst/priv/secret", "guess-42\n", 0600);
  fs.write("/dst/.rsync-filter", rule + "\n");
  fs.chown("/dst/.rsync-filter", nobody, nobody);
}

bool refused(const std::string& v) { return v.find("refused") != std::string::npos; }

}  // namespace

TEST_CASE("dst merge file: one owned by a user other than DST's owner (or root) is refused") {
  mock_fs fs;
  nobody_dst(fs, "merge,- theirs");
  fs.write("/dst/theirs", "guess-42\n", 0644);
  fs.chown("/dst/theirs", other, other);
  const std::string v = verdict(fs, "/dst", "guess-42");
  CHECK(refused(v));
  CHECK(v.find("uid 65534") != std::string::npos);
}

TEST_CASE("dst merge file: one DST's owner cannot read (a 0600 root file in a 0700 root directory) is refused unread") {
  mock_fs fs;
  nobody_dst(fs, "merge,- priv/secret");
  std::size_t reads = 0;
  fs.on_operation([&](mock_fs::op k, const std::string& path) {
    if (k == mock_fs::op::open_read && path == "/dst/priv/secret") ++reads;
  });
  const std::string v = verdict(fs, "/dst", "guess-42");
  CHECK(refused(v));
  CHECK(v.find("guess") == std::string::npos);
  CHECK(reads == 0);
}

TEST_CASE("dst merge file: a 0600 root file DST's owner may not read is refused also in a directory it may search") {
  mock_fs fs;
  nobody_dst(fs, "merge,- priv/secret");
  fs.chmod("/dst/priv", 0755);
  CHECK(refused(verdict(fs, "/dst", "guess-42")));
}

TEST_CASE("dst merge file: a missing one and an unreadable one give the same refusal, message and all") {
  mock_fs unreadable;
  nobody_dst(unreadable, "merge,- priv/secret");
  mock_fs missing;
  nobody_dst(missing, "merge,- priv/secret");
  missing.remove("/dst/priv/secret");
  mock_fs no_dir;
  nobody_dst(no_dir, "merge,- priv/secret");
  no_dir.remove("/dst/priv/secret");
  no_dir.remove("/dst/priv");
  const std::string a = verdict(unreadable, "/dst", "guess-42");
  CHECK(refused(a));
  CHECK(verdict(missing, "/dst", "guess-42") == a);
  CHECK(verdict(no_dir, "/dst", "guess-42") == a);
}

TEST_CASE("dst merge file: one DST's owner owns and may read still works, and root's world-readable one") {
  mock_fs fs;
  nobody_dst(fs, "merge,- sub/mine\nmerge,- pub");
  fs.mkdir("/dst/sub");
  fs.chown("/dst/sub", nobody, nobody);
  fs.write("/dst/sub/mine", "kept\n", 0600);
  fs.chown("/dst/sub/mine", nobody, nobody);
  fs.write("/dst/pub", "also-kept\n", 0644);  // root's, readable by all
  CHECK(verdict(fs, "/dst", "kept") == "excluded");
  CHECK(verdict(fs, "/dst", "also-kept") == "excluded");
  CHECK(verdict(fs, "/dst", "gone") == "kept");
}

TEST_CASE("dst merge file: in root's DST (or the runner's own) a missing one still holds no rules and root's secret is read") {
  mock_fs fs;
  fs.mkdir("/dst");
  fs.mkdir("/dst/priv", 0700);
  fs.write("/dst/priv/secret", "guess-42\n", 0600);
  fs.write("/dst/.rsync-filter", "merge,- priv/secret\nmerge,- priv/none\n");
  CHECK(verdict(fs, "/dst", "guess-42") == "excluded");
  CHECK(verdict(fs, "/dst", "wrong") == "kept");
  fs.chown("/dst", nobody, nobody);
  fs.act_as(nobody);  // nobody's run in nobody's DST: its own rights, as before
  CHECK(verdict(fs, "/dst", "guess-42") == "excluded");
}

TEST_CASE("dst merge file: below root's DST, a rule file in a user's subdirectory is read for that user") {
  mock_fs fs;
  fs.mkdir("/dst");
  fs.mkdir("/dst/home");
  fs.chown("/dst/home", nobody, nobody);
  fs.mkdir("/dst/home/priv", 0700);
  fs.write("/dst/home/priv/secret", "guess-42\n", 0600);
  fs.write("/dst/home/.rsync-filter", "merge,- priv/secret\n");
  fs.chown("/dst/home/.rsync-filter", nobody, nobody);
  CHECK(refused(verdict(fs, "/dst", "home/guess-42")));
}

TEST_CASE("dst merge file: a file only its group may read is refused (DST's owner's groups are not known)") {
  mock_fs fs;
  nobody_dst(fs, "merge,- grp");
  fs.write("/dst/grp", "guess-42\n", 0640);
  fs.chown("/dst/grp", 0, nobody);
  CHECK(refused(verdict(fs, "/dst", "guess-42")));
}

TEST_CASE("dst merge file, posix: root's copy of a 0700 priv/ and its 0600 secret in uid 65534's DST is not read for its rule file") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root (a DST of another uid)");
    return;
  }
  temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  make_dir(src);
  make_dir(src / "priv", 0700);
  write_file(src / "priv" / "secret", "guess-42\n", 0600);
  make_dir(dst);
  REQUIRE(::chown(dst.c_str(), nobody, nobody) == 0);
  CHECK(treesync::sync(src, dst).ok());  // root mirrors priv/ into nobody's DST
  REQUIRE(lstat_of(dst / "priv" / "secret").st_uid == 0);
  write_file(dst / ".rsync-filter", "merge,- priv/secret\n");
  REQUIRE(::chown((dst / ".rsync-filter").c_str(), nobody, nobody) == 0);
  treesync::posix_fs fs;
  const std::string unreadable = verdict(fs, dst.string(), "guess-42");
  CHECK(refused(unreadable));
  CHECK(unreadable.find("guess") == std::string::npos);
  CHECK(verdict(fs, dst.string(), "wrong") == unreadable);
  // the same outcome for a name that does not exist
  REQUIRE(::unlink((dst / "priv" / "secret").c_str()) == 0);
  CHECK(verdict(fs, dst.string(), "guess-42") == unreadable);
  // nobody's own readable file is still merged
  write_file(dst / ".rsync-filter", "merge,- mine\n");
  write_file(dst / "mine", "kept\n", 0600);
  REQUIRE(::chown((dst / "mine").c_str(), nobody, nobody) == 0);
  CHECK(verdict(fs, dst.string(), "kept") == "excluded");
  CHECK(verdict(fs, dst.string(), "gone") == "kept");
}
