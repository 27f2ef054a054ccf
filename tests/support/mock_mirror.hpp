// tests/support/mock_mirror.hpp - what a mirror of a mock_fs source tree must look like, computed
// from the source snapshot alone (never by running the engine), and the checks the reliability
// tests (test_faults.cpp, test_midrun.cpp) make after every run:
//
//   expected_mirror(fs, "/src", follow)   the source as a mirror must show it: with follow, every
//                                          symlink replaced by what it points to (recursively);
//   mirror_diff(want, got)                 how a destination snapshot differs from it;
//   lying_files(fs, "/src", "/dst", follow) destination files at their final name whose bytes
//                                          differ from the source's while their size and mtime
//                                          equal it: files that look up to date but are not;
//   temporaries(fs, "/dst")                 `.treesync-tmp-*` entries left behind;
//   exact_mirror_diff(fs, "/src", "/dst"[, follow])  mirror_diff of the whole destination, plus
//                                          the roots' own mode and mtime: empty when /dst is the
//                                          exact mirror.
#ifndef TREESYNC_TESTS_SUPPORT_MOCK_MIRROR_HPP
#define TREESYNC_TESTS_SUPPORT_MOCK_MIRROR_HPP

#include <treesync/mock_fs.hpp>

#include <map>
#include <string>
#include <vector>

namespace treesync_test {

using snapshot = std::map<std::string, treesync::mock_fs::node>;

inline bool is_temp_path(const std::string& rel) {
  const auto slash = rel.rfind('/');
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  return name.rfind(".treesync-tmp-", 0) == 0;
}

/// The entries of the mirror of `root`: with `follow`, a symlink stands for what it points to
/// (a file: its bytes, mode, mtime; a directory: its whole content).  Links that cannot be
/// resolved (dangling, cycles) are left out: the engine reports them and copies nothing.
inline snapshot expected_mirror(treesync::mock_fs& fs, const std::string& root, bool follow, int depth = 0) {
  snapshot out;
  const snapshot t = fs.tree(root);
  std::vector<std::string> under_link;  // prefixes below a followed link: spliced in recursively
  for (const auto& [rel, n] : t) {
    if (!follow || n.type != treesync::file_type::symlink) {
      out.emplace(rel, n);
      continue;
    }
    std::error_code ec;
    const treesync::stat_info st = fs.stat_path(root + "/" + rel, true, ec);
    if (ec) continue;  // dangling or a loop: reported, not copied
    treesync::mock_fs::node m;
    m.type = st.type;
    m.mode = st.mode;
    m.mtime_ns = st.mtime_ns;
    m.ino = st.ino;
    if (st.type == treesync::file_type::regular) {
      m.data = fs.read(root + "/" + rel);
      out.emplace(rel, m);
    } else if (st.type == treesync::file_type::directory) {
      if (depth > 8) continue;  // a cycle through links: the engine reports it
      out.emplace(rel, m);
      for (const auto& [sub, sn] : expected_mirror(fs, root + "/" + rel, follow, depth + 1)) out.emplace(rel + "/" + sub, sn);
    }
  }
  return out;
}

/// Differences between the mirror `want` and the destination snapshot `got` (types, bytes, link
/// targets, modes; mtimes of everything but symlinks), one line each; empty when equal.
inline std::string mirror_diff(const snapshot& want, const snapshot& got) {
  std::string out;
  for (const auto& [rel, w] : want) {
    const auto it = got.find(rel);
    if (it == got.end()) {
      out += "missing: " + treesync::escape(rel) + "\n";
      continue;
    }
    const auto& g = it->second;
    if (w.type != g.type) {
      out += "type: " + treesync::escape(rel) + " " + to_string(w.type) + " -> " + to_string(g.type) + "\n";
      continue;
    }
    if (w.data != g.data) out += "data: " + treesync::escape(rel) + "\n";
    if (w.type != treesync::file_type::symlink && w.mode != g.mode) out += "mode: " + treesync::escape(rel) + "\n";
    if (w.type != treesync::file_type::symlink && w.mtime_ns != g.mtime_ns) out += "mtime: " + treesync::escape(rel) + "\n";
  }
  for (const auto& kv : got)
    if (!want.count(kv.first)) out += "extra: " + treesync::escape(kv.first) + "\n";
  return out;
}

namespace detail_mirror {
inline std::string root_diff(const treesync::mock_fs& fs, const std::string& src, const std::string& dst) {
  std::string out;
  const treesync::stat_info s = fs.lstat(src);
  const treesync::stat_info d = fs.lstat(dst);
  if (s.mode != d.mode) out += "mode: <root>\n";
  if (s.mtime_ns != d.mtime_ns) out += "mtime: <root>\n";
  return out;
}
}  // namespace detail_mirror

/// How `dst` differs from the mirror of `src` (links not followed): every entry's type, bytes,
/// link target, mode and mtime (symlinks' mtimes aside), and the roots' own mode and mtime.
inline std::string exact_mirror_diff(const treesync::mock_fs& fs, const std::string& src, const std::string& dst) {
  if (!fs.exists(dst)) return "missing: <root>\n";
  return mirror_diff(fs.tree(src), fs.tree(dst)) + detail_mirror::root_diff(fs, src, dst);
}

/// The same for a mirror that follows links when `follow` is set (see expected_mirror).
inline std::string exact_mirror_diff(treesync::mock_fs& fs, const std::string& src, const std::string& dst,
                                     bool follow) {
  if (!fs.exists(dst)) return "missing: <root>\n";
  return mirror_diff(expected_mirror(fs, src, follow), fs.tree(dst)) + detail_mirror::root_diff(fs, src, dst);
}

/// Destination files (at their final names) that carry the source's size and mtime but not its
/// bytes: the next size+mtime run would trust them forever.
inline std::vector<std::string> lying_files(treesync::mock_fs& fs, const std::string& src, const std::string& dst,
                                            bool follow) {
  std::vector<std::string> out;
  if (!fs.exists(dst)) return out;
  const snapshot want = expected_mirror(fs, src, follow);
  for (const auto& [rel, d] : fs.tree(dst)) {
    if (d.type != treesync::file_type::regular || is_temp_path(rel)) continue;
    const auto it = want.find(rel);
    if (it == want.end() || it->second.type != treesync::file_type::regular) continue;
    const auto& s = it->second;
    if (s.data.size() == d.data.size() && s.mtime_ns == d.mtime_ns && s.data != d.data) out.push_back(rel);
  }
  return out;
}

inline std::vector<std::string> temporaries(const treesync::mock_fs& fs, const std::string& dst) {
  std::vector<std::string> out;
  if (!fs.exists(dst)) return out;
  for (const auto& kv : fs.tree(dst))
    if (is_temp_path(kv.first)) out.push_back(kv.first);
  return out;
}

/// A snapshot that also tells inodes apart (mock_fs::node's == ignores them).
inline bool same_with_inodes(const snapshot& a, const snapshot& b) {
  if (a != b) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || i->second.ino != j->second.ino) return false;
  return true;
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_MOCK_MIRROR_HPP
