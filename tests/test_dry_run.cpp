// A dry run has the recording applier (issue 26, item 4): the same operations as the writing one,
// each recording what it would do.  What it reports must be what the real run then does, for
// every kind of operation, the ones carried out after the walk (hard links, deletions) included.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using treesync::mock_fs;

namespace {

// Every action as one line: kind, type, path, what changed, the name linked to.
struct lines {
  std::vector<std::string>* out;
  void operator()(const treesync::action& a) const {
    out->push_back(std::string(treesync::to_string(a.kind)) + " " + treesync::to_string(a.type) + " '" +
                   std::string(a.path) + "' " + std::to_string(static_cast<unsigned>(a.changes)) + " " +
                   std::string(a.link_to));
  }
};

void pending(mock_fs& fs) {
  fs.write("/src/a", "same inode");
  fs.hard_link("/src/a", "/src/b");
  fs.write("/src/keep", "k");
  fs.mkdir("/src/ro", 0555);
  fs.write("/src/t", "a file where DST has a directory");
  fs.write("/src/u/inner", "a directory where DST has a file");
  fs.advance(10s);
  REQUIRE(treesync::sync(fs, "/src", "/dst", treesync::hard_links).ok());
  fs.chmod("/dst/ro", 0755);
  fs.write("/dst/ro/x", "extraneous, in a read-only directory");
  fs.chmod("/dst/ro", 0555);
  fs.remove("/dst/b");
  fs.write("/dst/b", "no longer a link");  // the link pass replaces it
  fs.remove("/dst/t");
  fs.write("/dst/t/1", "1");
  fs.remove("/dst/u");
  fs.write("/dst/u", "u");
  fs.write("/dst/.treesync-tmp-9-9-9/left", "a staged directory an interrupted run left");
  fs.write("/dst/gone/deep/x", "extraneous");
  fs.advance(10s);
  fs.reset_counters();
}

}  // namespace

TEST_CASE("dry_run: links, leftovers, replacements and deletions in a read-only directory are reported as the real run makes them") {
  for (const bool capped : {false, true}) {  // deletions at once, or waiting for the end of the walk (max_delete)
    CAPTURE(capped);
    mock_fs fs;
    pending(fs);
    treesync::options o;
    o.hard_links = true;
    const std::size_t cap = capped ? 100 : treesync::unlimited;
    const treesync::deletion::chosen del{treesync::deletion::kind::extraneous, cap};

    std::vector<std::string> dry_log;
    o.dry_run = true;
    const treesync::report dry = treesync::sync(fs, "/src", "/dst", o, del, lines{&dry_log});
    CHECK(fs.ops().writes() == 0);
    CHECK(dry.ok());

    std::vector<std::string> real_log;
    o.dry_run = false;
    const treesync::report real = treesync::sync(fs, "/src", "/dst", o, del, lines{&real_log});
    CHECK(real.ok());
    CHECK(dry_log == real_log);
    CHECK(dry.totals() == real.totals());
    CHECK(real.deleted == 5);  // ro/x, t/1, gone, gone/deep, gone/deep/x
    CHECK(real.cleaned == 1);
    CHECK(fs.lstat("/dst/b").ino == fs.lstat("/dst/a").ino);
    CHECK_FALSE(fs.exists("/dst/ro/x"));
    CHECK(fs.lstat("/dst/ro").mode == 0555);
    CHECK(fs.read("/dst/t") == "a file where DST has a directory");
    CHECK(fs.read("/dst/u/inner") == "a directory where DST has a file");
  }
}

namespace {

using op = mock_fs::op;

// The operations of the writing applier a run can make, each named.
const std::vector<std::pair<op, std::string>> writing_ops = {
    {op::open_write, "open_write"}, {op::rename, "rename"}, {op::unlink, "unlink"}, {op::rmdir, "rmdir"},
    {op::chmod, "chmod"},           {op::utime, "utime"},   {op::mkdir, "mkdir"},   {op::symlink, "symlink"},
    {op::chown, "chown"},           {op::mknod, "mknod"},   {op::link, "link"},     {op::setxattr, "setxattr"},
    {op::fsync, "fsync"}};

// Every kind of change a run makes (links::preserve), between them reaching each of writing_ops:
// a new file, a changed file, a mode, an owner, an xattr, a new link, a new FIFO, a new (staged)
// directory, a file replaced by a directory and a directory by a file, a hard link, a leftover
// cleaned, a tree deleted, a deletion in a read-only directory, a set-group-ID bit, all of it
// flushed (durable).
treesync::options every_change(mock_fs& fs) {
  treesync::options o;
  o.hard_links = o.specials = o.owner = o.group = o.xattrs = o.durable = true;
  fs.write("/src/changed", "old");
  fs.write("/src/mode", "m", 0644);
  fs.write("/src/owned", "o");
  fs.write("/src/to_dir", "a file that becomes a directory");
  fs.write("/src/to_file/x", "a directory that becomes a file");
  fs.write("/src/a", "same inode");
  fs.hard_link("/src/a", "/src/b");
  fs.mkdir("/src/ro", 0555);
  fs.mkdir("/src/sg", 0755);
  fs.advance(10s);
  REQUIRE(treesync::sync(fs, "/src", "/dst", o, treesync::links::preserve).ok());
  fs.write("/src/new", "new");
  fs.set_xattr("/src/new", "user.k", "v");
  fs.write("/src/changed", "changed, and longer");
  fs.chmod("/src/mode", 0600);
  fs.chown("/src/owned", 1000, 1000);
  fs.symlink("/src/newlink", "new");
  fs.fifo("/src/pipe");
  fs.write("/src/newdir/n", "in a staged directory");
  fs.remove("/src/to_dir");
  fs.write("/src/to_dir/1", "1");
  fs.remove("/src/to_file");
  fs.write("/src/to_file", "f");
  fs.chmod("/src/sg", 02755);
  fs.remove("/dst/b");
  fs.write("/dst/b", "no longer a link");
  fs.write("/dst/.treesync-tmp-9-9-9/left", "a staged directory an interrupted run left");
  fs.write("/dst/gone/deep/x", "extraneous");
  fs.chmod("/dst/ro", 0755);
  fs.write("/dst/ro/x", "extraneous, in a read-only directory");
  fs.chmod("/dst/ro", 0555);
  fs.advance(10s);
  fs.reset_counters();
  return o;
}

}  // namespace

TEST_CASE("dry_run: the recording applier makes none of the writes the writing applier makes for every kind of change") {
  mock_fs fs;
  treesync::options o = every_change(fs);
  const auto before = fs.tree("/dst");

  std::vector<std::string> dry_log;
  o.dry_run = true;
  const treesync::report dry = treesync::sync(fs, "/src", "/dst", o, treesync::links::preserve, lines{&dry_log});
  CHECK(dry.ok());
  for (const auto& w : writing_ops) {
    CAPTURE(w.second);
    CHECK(fs.ops()[w.first] == 0);
  }
  CHECK(fs.ops().bytes_written == 0);
  CHECK(fs.tree("/dst") == before);

  std::vector<std::string> real_log;
  o.dry_run = false;
  fs.reset_counters();
  const treesync::report real = treesync::sync(fs, "/src", "/dst", o, treesync::links::preserve, lines{&real_log});
  CHECK(real.ok());
  for (const auto& w : writing_ops) {  // the scenario reaches every one of them
    CAPTURE(w.second);
    CHECK(fs.ops()[w.first] > 0);
  }
  CHECK(dry_log == real_log);
  CHECK(dry.totals() == real.totals());
  CHECK(real.cleaned == 1);
  CHECK(fs.tree("/dst") != before);
}
