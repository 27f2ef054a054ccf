// tests/test_property.cpp - property test over mock_fs (issue 6, item 3).
//
// Seeded random source trees and random sequences of mutations (source and destination), each
// synced with a random combination of policies:
//   compare   size_mtime | checksum | always
//   deletion  extraneous | keep | delete_excluded
//   links     dereference | preserve | skip
//   exclude   none | a few globs ("*.o", "tmp/", "/top.txt")
//   write     atomic | in_place
//   dry_run   sometimes
// After each sync the destination must equal the mirror those policies define, computed here by a
// small reference model over the source and destination snapshots (never by calling the engine):
//
//   - a source entry that is excluded (by its type after following, for dereferenced links), a
//     skipped link, a dangling link or a link cycle under dereference is neither copied nor
//     deleted: whatever the destination had at that name stays as it was (a dangling link a rule
//     excludes as a link or as a directory is excluded: its counterpart is judged as extraneous);
//   - otherwise the destination has the entry: a file with the source's (or the link target's)
//     bytes, mode and mtime; a directory with its mode and mtime and, recursively, its content;
//     a preserved symlink with the same target text;
//   - a destination entry the source lacks is deleted when the deletion policy says so
//     (extraneous: unless excluded; keep: never; delete_excluded: always), else left alone;
//     `.treesync-tmp-*` leftovers are always removed, except under keep (nothing is deleted);
//   - an empty source against a non-empty destination is refused; dry_run changes nothing;
//   - the destination root gets the source root's mode and mtime.
// The compare and write policies do not change the result (the test never forges a destination
// file with the source's size and mtime), so they must all converge to the same mirror.
//
// Runs as many iterations as fit in TREESYNC_PROPERTY_SECONDS (default 3 s), and at least 200.
// A failing iteration prints its seed; TREESYNC_PROPERTY_SEED=<seed> replays just that one.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/mock_mirror.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using namespace std::chrono_literals;
using namespace treesync_test;

constexpr std::int64_t sec = 1000000000;

// ---- runtime-chosen policies (each delegates to the built-in it names) -------------------------

enum class cmp_kind { size_mtime, checksum, always };
enum class del_kind { extraneous, keep, delete_excluded };
enum class lnk_kind { dereference, preserve, skip };

struct config {
  cmp_kind cmp = cmp_kind::size_mtime;
  del_kind del = del_kind::extraneous;
  lnk_kind lnk = lnk_kind::dereference;
  bool exclude = false;
  bool in_place = false;
  bool dry = false;
};

std::string describe(const config& c) {
  static const char* const cmps[] = {"size_mtime", "checksum", "always"};
  static const char* const dels[] = {"extraneous", "keep", "delete_excluded"};
  static const char* const lnks[] = {"dereference", "preserve", "skip"};
  return std::string(cmps[int(c.cmp)]) + " " + dels[int(c.del)] + " " + lnks[int(c.lnk)] +
         (c.exclude ? " exclude{*.o,tmp/,/top.txt}" : "") + (c.in_place ? " in_place" : " atomic") +
         (c.dry ? " dry_run" : "");
}

struct any_compare {
  cmp_kind k;
  bool up_to_date(const treesync::file_pair& f) const {
    switch (k) {
      case cmp_kind::size_mtime: return treesync::compare::size_mtime{}.up_to_date(f);
      case cmp_kind::checksum: return treesync::compare::checksum.up_to_date(f);
      case cmp_kind::always: break;
    }
    return treesync::compare::always.up_to_date(f);
  }
};

struct any_deletion {
  del_kind k;
  bool removes(std::string_view rel, file_type t, bool ex) const {
    switch (k) {
      case del_kind::extraneous: return treesync::deletion::extraneous.removes(rel, t, ex);
      case del_kind::keep: return treesync::deletion::keep.removes(rel, t, ex);
      case del_kind::delete_excluded: break;
    }
    return treesync::deletion::delete_excluded.removes(rel, t, ex);
  }
  std::size_t limit() const { return treesync::unlimited; }
};

struct any_links {
  lnk_kind k;
  treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const {
    switch (k) {
      case lnk_kind::dereference: return treesync::links::dereference.on_symlink(rel, target, inside);
      case lnk_kind::preserve: return treesync::links::preserve.on_symlink(rel, target, inside);
      case lnk_kind::skip: break;
    }
    return treesync::links::skip.on_symlink(rel, target, inside);
  }
};

// The model's own exclusion rules, written out by hand (the engine gets the same as globs).
bool model_excluded(bool on, const std::string& rel, file_type t) {
  if (!on) return false;
  const auto slash = rel.rfind('/');
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  if (name.size() >= 2 && name.compare(name.size() - 2, 2, ".o") == 0) return true;  // *.o
  if (name == "tmp" && t == file_type::directory) return true;                         // tmp/
  return rel == "top.txt";                                                             // /top.txt
}

treesync::report run_engine(mock_fs& fs, const config& c, std::error_code& ec) {
  const any_compare cmp{c.cmp};
  const any_deletion del{c.del};
  const any_links lnk{c.lnk};
  const treesync::exclude globs{"*.o", "tmp/", "/top.txt"};
  const auto no_globs = treesync::exclude_nothing;
  auto go = [&](const auto& exc) {
    if (c.dry) {
      if (c.in_place) return treesync::sync(fs, "/src", "/dst", cmp, del, lnk, exc, treesync::write::in_place, treesync::dry_run, ec);
      return treesync::sync(fs, "/src", "/dst", cmp, del, lnk, exc, treesync::dry_run, ec);
    }
    if (c.in_place) return treesync::sync(fs, "/src", "/dst", cmp, del, lnk, exc, treesync::write::in_place, ec);
    return treesync::sync(fs, "/src", "/dst", cmp, del, lnk, exc, ec);
  };
  return c.exclude ? go(globs) : go(no_globs);
}

// ---- the reference model ---------------------------------------------------------------------------

std::vector<std::string> children_of(mock_fs& fs, const std::string& abs) {
  std::vector<std::string> out;
  for (const auto& kv : fs.tree(abs))
    if (kv.first.find('/') == std::string::npos) out.push_back(kv.first);
  return out;
}

void keep_subtree(const snapshot& before, const std::string& rel, snapshot& out) {
  const auto it = before.find(rel);
  if (it == before.end()) return;
  out[rel] = it->second;
  if (it->second.type != file_type::directory) return;
  const std::string prefix = rel + "/";
  for (auto j = before.lower_bound(prefix); j != before.end() && j->first.compare(0, prefix.size(), prefix) == 0; ++j)
    out[j->first] = j->second;
}

struct model {
  mock_fs& fs;
  const config& c;
  const snapshot& before;  // the destination before the run
  snapshot out;
  bool expect_errors = false;  // dangling links, cycles
  std::set<std::string> any_mtime;  // kept directories some content was removed from: new mtime
  std::map<std::string, std::int64_t> old_mtime_ok;  // the checksum BUG: the old mtime may stay

  // the directory pair (src_abs, rel); `ancestors`: inodes of the source directories on the path
  void dir(const std::string& src_abs, const std::string& rel, std::vector<std::uint64_t> ancestors) {
    std::set<std::string> names;
    for (const auto& n : children_of(fs, src_abs)) names.insert(n);
    const std::string prefix = rel.empty() ? "" : rel + "/";
    for (auto it = before.lower_bound(prefix); it != before.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it)
      if (it->first.find('/', prefix.size()) == std::string::npos) names.insert(it->first.substr(prefix.size()));

    const snapshot src_here = fs.tree(src_abs);
    for (const auto& name : names) {
      const std::string r = prefix + name;
      const auto s = src_here.find(name);
      if (s == src_here.end()) {
        extraneous(r);
        continue;
      }
      treesync::mock_fs::node n = s->second;
      const std::string abs = src_abs + "/" + name;
      file_type t = n.type;
      if (t == file_type::symlink) {
        if (c.lnk == lnk_kind::skip) {
          // an excluded skipped link's destination counterpart is judged as extraneous, like any
          // other excluded entry; a skipped link that is not excluded leaves it alone
          if (model_excluded(c.exclude, r, file_type::symlink)) {
            if (before.count(r)) extraneous(r);
          } else {
            keep_subtree(before, r, out);
          }
          continue;
        }
        if (c.lnk == lnk_kind::dereference) {
          std::error_code ec;
          const treesync::stat_info st = fs.stat_path(abs, true, ec);
          if (ec) {  // dangling, or a loop of links: an error unless excluded (rsync checks first,
                     // as a file and as a directory)
            if (model_excluded(c.exclude, r, file_type::symlink) || model_excluded(c.exclude, r, file_type::directory)) {
              if (before.count(r)) extraneous(r);
            } else {
              expect_errors = true;
              keep_subtree(before, r, out);
            }
            continue;
          }
          t = st.type;
          n.type = st.type;
          n.mode = st.mode;
          n.mtime_ns = st.mtime_ns;
          n.ino = st.ino;
          n.data = t == file_type::regular ? fs.read(abs) : std::string{};
        }
      }
      if (model_excluded(c.exclude, r, t)) {
        if (before.count(r)) extraneous(r);  // excluded: the destination entry is judged as extraneous
        continue;
      }
      if (t == file_type::directory) {
        bool cycle = false;
        for (auto a : ancestors) cycle |= a == n.ino;
        if (cycle) {
          expect_errors = true;
          keep_subtree(before, r, out);
          continue;
        }
        out[r] = n;
        auto sub = ancestors;
        sub.push_back(n.ino);
        dir(abs, r, sub);
      } else if (t == file_type::regular || t == file_type::symlink) {
        if (!make_room(r, t)) continue;
        out[r] = n;
        // BUG (see "compare::checksum gives a file whose bytes match the source's mtime"): a file
        // whose data a checksum comparison finds current keeps its old mtime (unless it was
        // racily clean, when it is re-stamped): either mtime is accepted for now.
        const auto b = before.find(r);
        if (t == file_type::regular && c.cmp == cmp_kind::checksum && b != before.end() &&
            b->second.type == file_type::regular && b->second.data == n.data)
          old_mtime_ok[r] = b->second.mtime_ns;
      } else {
        keep_subtree(before, r, out);  // special files: skipped
      }
    }
  }

  bool removes(const std::string& rel, file_type t) const {
    const bool ex = model_excluded(c.exclude, rel, t);
    return c.del == del_kind::delete_excluded || (c.del == del_kind::extraneous && !ex);
  }

  // Removes the destination entry `rel` (as it was before the run); inside a directory, entries
  // the deletion policy protects are kept, and then so is the directory.  Returns false when
  // something was kept.
  bool remove(const std::string& rel) {
    const auto& n = before.at(rel);
    if (n.type != file_type::directory) return true;
    bool kept = false, removed = false;
    const std::string prefix = rel + "/";
    for (auto it = before.lower_bound(prefix); it != before.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      if (it->first.find('/', prefix.size()) != std::string::npos) continue;
      if (!is_temp_path(it->first) && !removes(it->first, it->second.type)) {
        keep_subtree(before, it->first, out);
        kept = true;
      } else if (!remove(it->first)) {
        kept = true;
      } else {
        removed = true;
      }
    }
    if (kept) out[rel] = n;
    if (kept && removed) any_mtime.insert(rel);
    return !kept;
  }

  // A destination entry the source lacks (or whose source counterpart is excluded).
  void extraneous(const std::string& rel) {
    const auto& n = before.at(rel);
    if (is_temp_path(rel)) {  // purged, but never where nothing is deleted (issue 23)
      if (c.del == del_kind::keep) keep_subtree(before, rel, out);
      return;
    }
    if (removes(rel, n.type))
      remove(rel);
    else
      keep_subtree(before, rel, out);
  }

  // The source has `rel` as type `t` (not a directory): a destination directory there must go.
  // Returns false when it could not (protected content): the entry is then not written.
  bool make_room(const std::string& rel, file_type t) {
    const auto b = before.find(rel);
    if (b == before.end() || b->second.type != file_type::directory || t == file_type::directory) return true;
    if (remove(rel)) return true;
    expect_errors = true;
    return false;
  }
};

// ---- random trees and mutations --------------------------------------------------------------------

struct generator {
  std::mt19937_64 rng;
  explicit generator(std::uint64_t seed) : rng(seed) {}

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }

  std::string name() {
    static const char* const names[] = {"a", "b", "c", "dir", "x.o", "tmp", "top.txt", "z.h", ".hidden", "Mixed"};
    return names[below(sizeof names / sizeof *names)];
  }
  std::string content() {
    static const char* const words[] = {"", "x", "alpha", "bravo", "charlie delta", "0123456789abcdef"};
    std::string s = words[below(6)];
    if (chance(30)) s += words[below(6)];
    return s;
  }
  std::uint32_t file_mode() {
    static const std::uint32_t modes[] = {0644, 0600, 0755, 0640};
    return modes[below(4)];
  }
  std::uint32_t dir_mode() {
    static const std::uint32_t modes[] = {0755, 0700, 0750};
    return modes[below(3)];
  }
  std::int64_t old_time() { return (1500000000 + static_cast<std::int64_t>(below(100000))) * sec + static_cast<std::int64_t>(below(sec)); }

  // existing directories under root (absolute), root included; entries (absolute), root excluded
  std::vector<std::string> dirs(mock_fs& fs, const std::string& root) {
    std::vector<std::string> out{root};
    for (const auto& kv : fs.tree(root))
      if (kv.second.type == file_type::directory) out.push_back(root + "/" + kv.first);
    return out;
  }
  std::vector<std::string> entries(mock_fs& fs, const std::string& root) {
    std::vector<std::string> out;
    for (const auto& kv : fs.tree(root)) out.push_back(root + "/" + kv.first);
    return out;
  }

  // a link target: usually an entry of the tree (relative to the link's directory), sometimes
  // dangling, sometimes an ancestor (a cycle under dereference)
  std::string target(mock_fs& fs, const std::string& link_path) {
    const std::size_t depth = static_cast<std::size_t>(std::count(link_path.begin(), link_path.end(), '/')) - 2;
    std::string up;
    for (std::size_t i = 0; i < depth; ++i) up += "../";
    const int r = static_cast<int>(below(10));
    if (r == 0) return "no-such-entry";
    if (r == 1) return depth > 0 ? ".." : ".";  // ".." at the root escapes the source: see the BUG test
    if (r == 2) return ".";
    const auto all = entries(fs, "/src");
    if (all.empty()) return "missing";
    return up + all[below(all.size())].substr(5);
  }

  void create(mock_fs& fs, const std::string& path) {
    if (fs.exists(path)) fs.remove(path);
    const std::size_t kind = below(10);
    if (kind < 6) {
      fs.write(path, content(), file_mode());
      fs.set_mtime(path, old_time());
    } else if (kind < 8) {
      fs.mkdir(path, dir_mode());
      fs.set_mtime(path, old_time());
    } else {
      fs.symlink(path, target(fs, path));
    }
  }

  void populate(mock_fs& fs) {
    fs.mkdir("/src", 0755);
    const std::size_t n = 3 + below(25);
    for (std::size_t i = 0; i < n; ++i) {
      const auto ds = dirs(fs, "/src");
      const std::string dir = ds[below(ds.size())];
      if (std::count(dir.begin(), dir.end(), '/') > 4) continue;
      create(fs, dir + "/" + name());
    }
  }

  // one source mutation: add, delete, rewrite, chmod, re-time, or swap a type
  void mutate_source(mock_fs& fs) {
    const auto all = entries(fs, "/src");
    const std::size_t what = below(7);
    if (all.empty() || what == 0) {
      const auto ds = dirs(fs, "/src");
      const std::string dir = ds[below(ds.size())];
      if (std::count(dir.begin(), dir.end(), '/') <= 4) create(fs, dir + "/" + name());
      return;
    }
    const std::string p = all[below(all.size())];
    const auto st = fs.lstat(p);
    switch (what) {
      case 1: fs.remove(p); break;
      case 2:
        if (st.type == file_type::regular) fs.write(p, content());  // stamped now: maybe racy
        break;
      case 3:
        if (st.type != file_type::symlink) fs.chmod(p, st.type == file_type::directory ? dir_mode() : file_mode());
        break;
      case 4:
        if (st.type != file_type::symlink) fs.set_mtime(p, old_time());
        break;
      default: create(fs, p); break;  // a type swap (or a fresh entry of the same type)
    }
  }

  // the destination is tampered with: junk added, an entry deleted or rewritten, a leftover
  // temporary; never a forged file with the source's size and mtime
  void mutate_destination(mock_fs& fs) {
    if (!fs.exists("/dst")) return;
    const auto all = entries(fs, "/dst");
    const std::size_t what = below(5);
    if (what == 0 || all.empty()) {
      const auto ds = dirs(fs, "/dst");
      const std::string dir = ds[below(ds.size())];
      const std::string p = dir + "/" + (chance(20) ? std::string(".treesync-tmp-77-") + std::to_string(below(9)) : name());
      if (!fs.exists(p)) fs.write(p, "junk " + content());
      return;
    }
    const std::string p = all[below(all.size())];
    if (what == 1) {
      fs.remove(p);
    } else if (what == 2 && fs.lstat(p).type == file_type::regular) {
      fs.write(p, "tampered: " + content());  // a new size or a new (current) mtime
    } else if (what == 3) {
      fs.remove(p);
      fs.symlink(p, "/outside");
    }
  }

  config policies() {
    config c;
    c.cmp = static_cast<cmp_kind>(below(3));
    c.del = static_cast<del_kind>(below(3));
    c.lnk = static_cast<lnk_kind>(below(3));
    c.exclude = chance(40);
    c.in_place = chance(40);
    c.dry = chance(15);
    return c;
  }
};

// One iteration: a random tree, then a few (mutate, sync, check) steps.  Returns "" or what failed.
std::string iteration(std::uint64_t seed) {
  generator g(seed);
  mock_fs fs;
  if (g.chance(50)) fs.set_granularity(1s);
  fs.write("/outside/keep", "outside the destination");
  g.populate(fs);
  fs.advance(std::chrono::seconds(g.below(3)));
  const std::size_t steps = 2 + g.below(4);
  for (std::size_t step = 0; step < steps; ++step) {
    if (step > 0) {
      for (std::size_t m = 1 + g.below(4); m > 0; --m) g.mutate_source(fs);
      if (g.chance(40)) g.mutate_destination(fs);
    }
    const auto adv = g.below(3);
    fs.advance(adv == 0 ? 0s : adv == 1 ? std::chrono::nanoseconds(1ms) : std::chrono::nanoseconds(10s));
    const config c = g.policies();
    const std::string where = "step " + std::to_string(step) + " (" + describe(c) + "): ";

    const bool dst_existed = fs.exists("/dst");
    const snapshot before = dst_existed ? fs.tree("/dst") : snapshot{};
    const snapshot src_before = fs.tree("/src");
    const snapshot outside = fs.tree("/outside");
    const auto src_root = fs.lstat("/src");

    model m{fs, c, before, {}, false, {}, {}};
    const bool src_empty = src_before.empty();
    bool dst_nonempty = false;
    for (const auto& kv : before)
      if (kv.first.find('/') == std::string::npos && !is_temp_path(kv.first)) dst_nonempty = true;
    const bool refused = src_empty && dst_nonempty;
    m.dir("/src", "", {src_root.ino});

    std::error_code ec;
    const treesync::report r = run_engine(fs, c, ec);

    if (fs.tree("/src") != src_before) return where + "the source changed";
    if (fs.tree("/outside") != outside) return where + "something outside the destination changed";
    if (refused) {
      if (ec != treesync::errc::empty_source) return where + "an empty source was not refused: " + ec.message();
      if (fs.tree("/dst") != before) return where + "a refused run changed the destination";
      continue;
    }
    if (ec) return where + "refused: " + ec.message();
    if (c.dry) {
      if (fs.exists("/dst") != dst_existed || (dst_existed && fs.tree("/dst") != before))
        return where + "dry_run changed the destination";
      continue;
    }
    if (!m.expect_errors && !r.ok())
      return where + "unexpected error: " + std::string(treesync::to_string(r.errors[0].operation)) + " " + r.errors[0].path + ": " + r.errors[0].code.message();
    const snapshot got = fs.tree("/dst");
    for (const auto& rel : m.any_mtime)
      if (m.out.count(rel) && got.count(rel)) m.out[rel].mtime_ns = got.at(rel).mtime_ns;
    for (const auto& [rel, t] : m.old_mtime_ok)
      if (m.out.count(rel) && got.count(rel) && got.at(rel).mtime_ns == t) m.out[rel].mtime_ns = t;
    const std::string diff = mirror_diff(m.out, got);
    if (!diff.empty()) return where + "the destination is not the mirror the policies define:\n" + diff;
    if (fs.lstat("/dst").mode != src_root.mode || fs.lstat("/dst").mtime_ns != src_root.mtime_ns)
      return where + "the destination root's mode or mtime";
  }
  return "";
}

double budget_seconds() {
  if (const char* s = std::getenv("TREESYNC_PROPERTY_SECONDS")) return std::atof(s);
  return 3.0;
}

}  // namespace

TEST_CASE("property: random trees, mutations and policy combinations always sync to the mirror the policies define") {
  if (const char* s = std::getenv("TREESYNC_PROPERTY_SEED")) {
    const std::uint64_t seed = std::strtoull(s, nullptr, 0);
    INFO("replaying seed ", seed);
    const std::string failure = iteration(seed);
    CHECK_MESSAGE(failure.empty(), "seed ", seed, ": ", failure);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto budget = std::chrono::duration<double>(budget_seconds());
  std::random_device rd;
  const std::uint64_t base = (std::uint64_t(rd()) << 32) ^ rd();
  std::size_t n = 0, failures = 0;
  while (n < 200 || std::chrono::steady_clock::now() - start < budget) {
    const std::uint64_t seed = base + n;
    ++n;
    const std::string failure = iteration(seed);
    if (!failure.empty()) {
      ++failures;
      INFO("replay with TREESYNC_PROPERTY_SEED=", seed);
      CHECK_MESSAGE(failure.empty(), "seed ", seed, ": ", failure);
      if (failures >= 3) break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("property: ", n, " iterations in ", secs, " s (", static_cast<double>(n) / secs, " iterations/s), ", failures,
          " failing");
}

// ---- bugs the property test found, pinned one by one --------------------------------------------

// Regression (was a bug): compare::checksum (like any policy that ignores mtimes) finds a destination file with the
// source's bytes up to date, and the engine then fixes its mode but never its mtime: the result is
// not a mirror (Guarantees 1: same mtime to the nanosecond), and the next run with the default
// size_mtime comparison rewrites the file it could have kept.  rsync -c -t sets the mtime of a
// file whose checksum matches.  Repro: src/f and dst/f with equal bytes and different mtimes;
// sync(fs, "/src", "/dst", compare::checksum) -> dst/f keeps its old mtime.
TEST_CASE("compare::checksum gives a file whose bytes match the source's mtime") {
  mock_fs fs;
  fs.write("/src/f", "same bytes");
  fs.set_mtime("/src/f", 1600000000 * sec + 1);
  fs.write("/dst/f", "same bytes");
  fs.set_mtime("/dst/f", 1600000500 * sec + 2);
  fs.advance(10s);
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::compare::checksum);
  CHECK(r.ok());
  CHECK(r.updated == 0);
  CHECK(fs.lstat("/dst/f").mtime_ns == 1600000000 * sec + 1);
}

// Regression (was a bug): under links::dereference (the default), a source symlink to a directory that contains the
// destination (".." at the source root, "/", a home directory...) is followed into the destination
// itself: cycle detection only knows the source directories on the current path, and the
// streaming walk lists destination directories it has just created, so the run copies the
// destination into itself level after level (dst/up/dst/up/dst/...) until the disk or memory is
// exhausted (a 12,000-level recursion and std::bad_alloc in the property test, seed-independent).
// A followed directory that is the destination root (by device+inode) must be reported like a
// cycle and not entered.  Repro: src/f, src/up -> ".."; sync(fs, "/src", "/dst") never ends.
TEST_CASE("a dereferenced source link to a directory containing the destination is not followed into it") {
  mock_fs fs;
  fs.write("/src/f", "f");
  fs.symlink("/src/up", "..");
  fs.advance(10s);
  std::size_t ops = 0;
  fs.on_operation([&](mock_fs::op, const std::string&) {
    if (++ops > 5000) fs.fail_any(1, std::errc::io_error);  // a runaway: fail everything from here on
  });
  std::error_code ec;
  const auto r = treesync::sync(fs, "/src", "/dst", ec);
  fs.on_operation(nullptr);
  CHECK(ops <= 5000);
  CHECK_FALSE(ec);
  CHECK(fs.read("/dst/f") == "f");
  CHECK_FALSE(fs.exists("/dst/up/dst/up"));
  // "up" is the filesystem root: its "dst" is the destination (not entered), its "src" the source
  // (a cycle): each reported once, and nothing else
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].path == "up/dst");
  CHECK(r.errors[0].code == treesync::errc::nested_directory);
  CHECK(r.errors[1].path == "up/src");
  CHECK(r.errors[1].code == treesync::errc::symlink_cycle);
}
