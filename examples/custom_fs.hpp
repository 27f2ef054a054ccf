// custom_fs.hpp - a filesystem backend of your own, in memory: the start of a treesync backend
//
// treesync's engine reaches a filesystem only through the operations of the filesystem contract
// (<treesync/filesystem.hpp>, [treesync.filesystem]).  This file meets that contract with the
// least machinery: every entry of the tree is a node in one std::map keyed by its absolute path
// ("/", "/src", "/src/a.txt"), and a dir_handle is the path of an open directory.  Copy it and
// replace the map by your storage (an object store, an archive, a remote API, ...); then run the
// conformance suite (tests/test_conformance.cpp) over your type.
//
// What it declares it cannot do (capabilities()): owners, device nodes/FIFOs, hard links,
// extended attributes, durability (nothing to flush) and pinned handles (a handle is a path: a
// directory renamed under a run is not followed).  Everything else the engine relies on holds:
// atomic rename over an existing name, (dev, ino) identity, nanosecond mtimes and a ctime of its
// own, symlinks kept verbatim.  One mutex makes it safe under jobs{n}.
#ifndef TREESYNC_EXAMPLES_CUSTOM_FS_HPP
#define TREESYNC_EXAMPLES_CUSTOM_FS_HPP

#include <treesync/treesync.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace custom {

using treesync::file_type;
using treesync::stat_info;

class memory_fs {
 public:
  struct dir_handle {
    std::string path;  // absolute, canonical (no links, no "." or ".." components)
  };

  static constexpr treesync::filesystem_capabilities capabilities() noexcept {
    treesync::filesystem_capabilities c;
    c.owners = false;
    c.specials = false;
    c.hard_links = false;
    c.xattrs = false;
    c.durable = false;
    c.pinned_handles = false;
    return c;
  }

  memory_fs() { nodes_["/"] = make_node(file_type::directory, 0755); }

  // ---- setup, for the program that owns the filesystem (not part of the contract) -------------
  // Each takes an absolute path whose parent directories exist or are made (0755).

  void write_file(const std::string& path, const std::string& data, std::uint32_t mode = 0644,
                  std::int64_t mtime_ns = 0) {
    const std::lock_guard<std::mutex> lock(mu_);
    node& n = put(path, file_type::regular, mode);
    n.data = data;
    if (mtime_ns != 0)
      n.mtime = mtime_ns;
  }
  void make_directory(const std::string& path, std::uint32_t mode = 0755) {
    const std::lock_guard<std::mutex> lock(mu_);
    put(path, file_type::directory, mode);
  }
  void make_link(const std::string& path, const std::string& target) {
    const std::lock_guard<std::mutex> lock(mu_);
    put(path, file_type::symlink, 0777).data = target;
  }
  void erase(const std::string& path) {  // a whole subtree
    const std::lock_guard<std::mutex> lock(mu_);
    erase_tree(path);
  }
  /// Whether `path` exists (not followed); `out` becomes what it is.
  bool lookup(const std::string& path, stat_info& out) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = nodes_.find(path);
    if (it == nodes_.end())
      return false;
    out = info(it->second);
    return true;
  }
  std::string content(const std::string& path) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = nodes_.find(path);
    return it == nodes_.end() ? std::string() : it->second.data;
  }
  /// Every path under `root` (root excluded) with what it is, sorted.
  std::vector<std::string> listing(const std::string& root) const {
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    const std::string prefix = root == "/" ? "/" : root + "/";
    for (auto it = nodes_.lower_bound(prefix); it != nodes_.end() && starts_with(it->first, prefix); ++it) {
      std::string line = it->first.substr(prefix.size()) + " (" + treesync::to_string(it->second.type) + ")";
      if (it->second.type == file_type::symlink)
        line += " -> " + it->second.data;
      if (it->second.type == file_type::regular) {
        line += " \"";
        for (const char ch : it->second.data)
          line += ch == '\n' ? std::string("\\n") : std::string(1, ch);
        line += "\"";
      }
      out.push_back(line);
    }
    return out;
  }

  // ---- the contract: at the roots ---------------------------------------------------------------

  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const std::string c = resolve(p.generic_string(), follow, ec);
    return ec ? stat_info{} : info(nodes_.at(c));
  }
  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const std::string c = resolve(p.generic_string(), true, ec);
    return ec ? std::filesystem::path() : std::filesystem::path(c);
  }
  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const std::string c = resolve(p.generic_string(), true, ec);
    if (ec)
      return {};
    if (nodes_.at(c).type != file_type::directory)
      return fail(ec, std::errc::not_a_directory), dir_handle{};
    return {c};
  }
  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    const std::string s = p.generic_string();
    const auto slash = s.find_last_of('/');
    const std::string parent =
        resolve(slash == std::string::npos || slash == 0 ? "/" : s.substr(0, slash), true, ec);
    if (ec)
      return;
    create(dir_handle{parent}, s.substr(slash == std::string::npos ? 0 : slash + 1), file_type::directory,
           mode, ec);
  }

  // ---- the contract: reading through a handle ---------------------------------------------------

  std::vector<treesync::dir_entry> list(dir_handle& d, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<treesync::dir_entry> out;
    if (!is_dir(d.path))
      return fail(ec, std::errc::no_such_file_or_directory), out;
    for_children(d.path, [&](const std::string& name, const node& n) { out.push_back({name, n.type}); });
    ec.clear();
    return out;
  }
  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    std::string p = at(d, name);
    if (follow)
      p = resolve(p, true, ec);
    if (ec)
      return {};
    const node* n = find(p, ec);
    return n ? info(*n) : stat_info{};
  }
  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const;
  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const node* n = find(at(d, name), ec);
    if (!n)
      return {};
    if (n->type != file_type::symlink)
      return fail(ec, std::errc::invalid_argument), std::string();
    return n->data;
  }
  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const {
    const std::lock_guard<std::mutex> lock(mu_);
    const node* x = find(follow ? resolve(at(a, an), true, ec) : at(a, an), ec);
    const node* y = x ? find(at(b, bn), ec) : nullptr;
    if (!x || !y)
      return false;
    if (x->type != file_type::regular || y->type != file_type::regular)
      return fail(ec, treesync::errc::special_file), false;
    return x->data == y->data;
  }

  // ---- the contract: writing through a handle ---------------------------------------------------

  treesync::copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd,
                                  const std::string& dst_name, const stat_info& expected,
                                  const treesync::copy_options& opt, std::error_code& ec);
  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    if (node* n = find(at(d, name), ec))
      n->mode = mode & 07777, n->ctime = now();
  }
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    if (node* n = find(at(d, name), ec))
      n->mtime = ns, n->ctime = now();
  }
  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    relocate(at(d, from), at(d, to), ec);
  }
  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    relocate(at(from, name), at(to, to_name), ec);
  }
  void remove(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    const node* n = find(at(d, name), ec);
    if (!n)
      return;
    if (n->type == file_type::directory)
      return fail(ec, std::errc::is_a_directory);
    nodes_.erase(at(d, name));
    touch(d.path);
  }
  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    const std::string p = at(d, name);
    const node* n = find(p, ec);
    if (!n)
      return;
    if (n->type != file_type::directory)
      return fail(ec, std::errc::not_a_directory);
    bool empty = true;
    for_children(p, [&](const std::string&, const node&) { empty = false; });
    if (!empty)
      return fail(ec, std::errc::directory_not_empty);
    nodes_.erase(p);
    touch(d.path);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    create(d, name, file_type::directory, mode, ec);
  }
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) {
    const std::lock_guard<std::mutex> lock(mu_);
    create(d, name, file_type::symlink, 0777, ec);
    if (!ec)
      nodes_.at(at(d, name)).data = target;
  }
  // declared missing in capabilities(): they say so instead of pretending
  void set_owner(dir_handle&, const std::string&, std::int64_t, std::int64_t, std::error_code& ec) {
    fail(ec, std::errc::operation_not_supported);
  }
  void make_special(dir_handle&, const std::string&, const stat_info&, std::error_code& ec) {
    fail(ec, std::errc::operation_not_supported);
  }
  void link(dir_handle&, const std::string&, dir_handle&, const std::string&, std::error_code& ec) {
    fail(ec, std::errc::operation_not_supported);
  }
  void copy_xattrs(dir_handle&, dir_handle&, std::error_code& ec) { ec.clear(); }
  void sync_dir(dir_handle&, std::error_code& ec) { ec.clear(); }

  // ---- the contract: clocks ----------------------------------------------------------------------

  std::int64_t now() const {
    using namespace std::chrono;
    return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  }
  std::int64_t racy_window() const noexcept { return 1000000; }  // 1 ms: our clock, our stamps

 private:
  struct node {
    file_type type = file_type::none;
    std::string data;  // a file's bytes, a link's target
    std::uint32_t mode = 0;
    std::int64_t mtime = 0, ctime = 0;
    std::uint64_t ino = 0;
  };

  static bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
  }
  static std::string parent_of(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  static std::string join(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
  }
  static std::string at(const dir_handle& d, const std::string& name) {
    return name == "." ? d.path : join(d.path, name);
  }
  template <class E>
  static void fail(std::error_code& ec, E e) {
    ec = make_error_code(e);
  }

  node make_node(file_type t, std::uint32_t mode) {
    node n;
    n.type = t;
    n.mode = mode & 07777;
    n.mtime = n.ctime = now();
    n.ino = ++last_ino_;
    return n;
  }
  stat_info info(const node& n) const {
    stat_info s;
    s.type = n.type;
    s.size = n.data.size();
    s.mtime_ns = n.mtime;
    s.ctime_ns = n.ctime;
    s.mode = n.mode;
    s.dev = 1;
    s.ino = n.ino;
    return s;
  }
  bool is_dir(const std::string& p) const {
    const auto it = nodes_.find(p);
    return it != nodes_.end() && it->second.type == file_type::directory;
  }
  node* find(const std::string& p, std::error_code& ec) {
    const auto it = nodes_.find(p);
    if (it == nodes_.end())
      return fail(ec, std::errc::no_such_file_or_directory), nullptr;
    return ec.clear(), &it->second;
  }
  const node* find(const std::string& p, std::error_code& ec) const {
    return const_cast<memory_fs*>(this)->find(p, ec);
  }
  template <class F>
  void for_children(const std::string& dir, F&& f) const {  // the direct children, in name order
    const std::string prefix = dir == "/" ? "/" : dir + "/";
    for (auto it = nodes_.lower_bound(prefix); it != nodes_.end() && starts_with(it->first, prefix); ++it)
      if (it->first.size() > prefix.size() && it->first.find('/', prefix.size()) == std::string::npos)
        f(it->first.substr(prefix.size()), it->second);
  }
  void touch(const std::string& dir) {  // a directory's mtime changes with its entries
    if (auto it = nodes_.find(dir); it != nodes_.end())
      it->second.mtime = it->second.ctime = now();
  }
  void create(const dir_handle& d, const std::string& name, file_type t, std::uint32_t mode,
              std::error_code& ec) {
    if (!is_dir(d.path))
      return fail(ec, std::errc::no_such_file_or_directory);
    if (name.empty() || name == "." || name == "..")
      return fail(ec, std::errc::invalid_argument);
    if (!nodes_.emplace(at(d, name), make_node(t, mode)).second)
      return fail(ec, std::errc::file_exists);
    touch(d.path);
    ec.clear();
  }

  // A path (absolute; a relative one is taken from "/") with every link resolved, the last one
  // only when follow_last; "." and ".." handled.  ENOENT for a missing component, ENOTDIR for a
  // non-directory in the middle, ELOOP after 40 links.
  std::string resolve(const std::string& path, bool follow_last, std::error_code& ec) const;

  // rename and move: `to` replaced atomically (we hold the lock); a directory moves with its subtree
  void relocate(const std::string& from, const std::string& to, std::error_code& ec);
  void erase_tree(const std::string& path) {
    nodes_.erase(path);
    const std::string prefix = path + "/";
    while (true) {
      const auto it = nodes_.lower_bound(prefix);
      if (it == nodes_.end() || !starts_with(it->first, prefix))
        break;
      nodes_.erase(it);
    }
  }
  node& put(const std::string& path, file_type t, std::uint32_t mode) {  // setup: parents made
    if (path != "/" && !nodes_.count(parent_of(path)))
      put(parent_of(path), file_type::directory, 0755);
    erase_tree(path);
    node& n = nodes_[path] = make_node(t, mode);
    touch(parent_of(path));
    return n;
  }

  mutable std::mutex mu_;
  std::map<std::string, node> nodes_;
  std::uint64_t last_ino_ = 0;
};

inline memory_fs::dir_handle memory_fs::open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
  const std::lock_guard<std::mutex> lock(mu_);
  if (name == "..") {  // by path: the parent of the name the handle was opened as
    if (!is_dir(parent_of(d.path)))
      return fail(ec, std::errc::no_such_file_or_directory), dir_handle{};
    return ec.clear(), dir_handle{parent_of(d.path)};
  }
  std::string p = at(d, name);
  const auto it = nodes_.find(p);
  if (it == nodes_.end())
    return fail(ec, std::errc::no_such_file_or_directory), dir_handle{};
  if (it->second.type == file_type::symlink) {
    if (!follow)
      return fail(ec, std::errc::too_many_symbolic_link_levels), dir_handle{};
    p = resolve(p, true, ec);
    if (ec)
      return {};
  }
  if (!is_dir(p))
    return fail(ec, std::errc::not_a_directory), dir_handle{};
  ec.clear();
  return {p};
}

inline treesync::copy_result memory_fs::copy_file(dir_handle& sd, const std::string& name, dir_handle& dd,
                                                  const std::string& dst_name, const stat_info& expected,
                                                  const treesync::copy_options& opt, std::error_code& ec) {
  const std::lock_guard<std::mutex> lock(mu_);
  treesync::copy_result res;
  res.method = treesync::copy_method::memory;
  ec.clear();
  const auto src_it = nodes_.find(at(sd, name));
  if (src_it == nodes_.end())
    return fail(ec, std::errc::no_such_file_or_directory), res;
  const node* src = &src_it->second;
  if (src->type == file_type::symlink) {
    if (!opt.follow)
      return fail(ec, std::errc::too_many_symbolic_link_levels), res;
    src = find(resolve(at(sd, name), true, ec), ec);
    if (!src)
      return res;
  }
  if (src->type != file_type::regular)
    return fail(ec, treesync::errc::special_file), res;
  if (opt.cancel && opt.cancel->load())
    return fail(ec, std::errc::operation_canceled), res;
  const std::string to = at(dd, dst_name);
  const auto old = nodes_.find(to);
  res.destination_failed = true;
  if (old != nodes_.end() && (!opt.replace || old->second.type != file_type::regular))
    return fail(ec, old->second.type == file_type::directory ? std::errc::is_a_directory
                                                             : std::errc::file_exists),
           res;
  if (old == nodes_.end())
    create(dd, dst_name, file_type::regular, 0600, ec);
  if (ec)
    return res;
  node& out = nodes_.at(to);
  out.data = src->data;
  out.ctime = now();
  res.bytes = out.data.size();
  // the source cannot change during a copy under our lock; a real backend reads, then checks
  if (src->data.size() != expected.size || src->mtime != expected.mtime_ns)
    return res.destination_failed = false, fail(ec, treesync::errc::changed_during_copy), res;
  out.mode = expected.mode & 07777;
  out.mtime = expected.mtime_ns;
  res.destination_failed = false;
  ec.clear();
  return res;
}

inline std::string memory_fs::resolve(const std::string& path, bool follow_last, std::error_code& ec) const {
  std::vector<std::string> todo;  // components still to walk, the next one last
  const auto push_path = [&todo](const std::string& p) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i <= p.size();) {
      const std::size_t j = std::min(p.find('/', i), p.size());
      if (j > i)
        parts.push_back(p.substr(i, j - i));
      i = j + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_path(path);
  std::string cur = "/";
  int links = 0;
  while (!todo.empty()) {
    const std::string c = todo.back();
    todo.pop_back();
    if (c == ".")
      continue;
    if (c == "..") {
      cur = parent_of(cur);
      continue;
    }
    if (!is_dir(cur))
      return fail(ec, std::errc::not_a_directory), std::string();
    const std::string next = join(cur, c);
    const auto it = nodes_.find(next);
    if (it == nodes_.end())
      return fail(ec, std::errc::no_such_file_or_directory), std::string();
    if (it->second.type == file_type::symlink && (follow_last || !todo.empty())) {
      if (++links > 40)
        return fail(ec, std::errc::too_many_symbolic_link_levels), std::string();
      if (!it->second.data.empty() && it->second.data[0] == '/')
        cur = "/";
      push_path(it->second.data);
      continue;
    }
    cur = next;
  }
  ec.clear();
  return cur;
}

inline void memory_fs::relocate(const std::string& from, const std::string& to, std::error_code& ec) {
  const node* f = find(from, ec);
  if (!f)
    return;
  if (!is_dir(parent_of(to)))
    return fail(ec, std::errc::no_such_file_or_directory);
  if (from == to)
    return;
  const bool dir = f->type == file_type::directory;
  if (dir && starts_with(to, from + "/"))
    return fail(ec, std::errc::invalid_argument);
  if (const auto old = nodes_.find(to); old != nodes_.end()) {
    const bool old_dir = old->second.type == file_type::directory;
    if (old_dir && !dir)
      return fail(ec, std::errc::is_a_directory);
    if (!old_dir && dir)
      return fail(ec, std::errc::not_a_directory);
    bool empty = true;
    for_children(to, [&](const std::string&, const node&) { empty = false; });
    if (old_dir && !empty)
      return fail(ec, std::errc::directory_not_empty);
    nodes_.erase(old);
  }
  std::vector<std::pair<std::string, node>> moving;
  moving.emplace_back(to, nodes_.at(from));
  const std::string prefix = from + "/";
  for (auto it = nodes_.lower_bound(prefix); dir && it != nodes_.end() && starts_with(it->first, prefix);
       ++it)
    moving.emplace_back(to + it->first.substr(from.size()), it->second);
  erase_tree(from);
  for (auto& [p, n] : moving)
    nodes_.emplace(p, std::move(n));
  nodes_.at(to).ctime = now();
  touch(parent_of(from));
  touch(parent_of(to));
}

}  // namespace custom

// The engine for memory_fs compiled once, in custom_fs_engine.cpp (TREESYNC_ENGINE_INSTANTIATE):
// a translation unit that calls sync() with it compiles only sync()'s adapter (README, "The
// engine compiled once").  Without this line every such translation unit compiles the engine.
TREESYNC_ENGINE_EXTERN(custom::memory_fs);

#endif  // TREESYNC_EXAMPLES_CUSTOM_FS_HPP
