// treesync/detail/manifest.hpp - the state file: what a run left in the destination
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_MANIFEST_HPP
#define TREESYNC_DETAIL_MANIFEST_HPP

#include "../traits.hpp"

#include <cstdlib>
#include <typeinfo>

// [treesync.detail.manifest] --------------------------------------------------------------------
//
// A state file (state_file{path}) records, per destination directory a run completed, the
// directory's own stat and its entries: name, type and, where the run knew it, the entry's stat
// (as the destination reports it: size, mtime, ctime, mode, owner, device and inode) and a link's
// target.  The next run may take a directory's entries from it instead of reading the
// destination (verify::dirs when the directory's stamps still match, verify::none always).
//
// What it records is only ever what is true: a directory's record is made from what the run
// read of the destination or, for an entry it wrote, from a stat of the entry after the write;
// a directory where anything failed is left out (its next run reads it); the file is removed
// before a run's first write and written (temporary + rename) only after a run that was not
// stopped.  So a run killed at any point leaves either no state file or one that describes a
// destination no write has touched since.
//
// The format is text, one record per line, fields separated by one space, names and paths with
// bytes below 0x21, 0x7f and '%' escaped as %XX:
//   treesync-state 1
//   id <escaped identity: version, source, destination, policy set, time model>
//   D <rel or "/" for the root> <settled 0|1> <entries> <dev> <ino> <mode> <uid> <gid> <mtime> <ctime>
//   E <name> <type> - | <size> <mtime> <ctime> <mode> <uid> <gid> <dev> <ino> <nlink> <rdev>  [<target>]
//   end <directories>

/// What a state file's identity calls this version of treesync.
#ifdef TREESYNC_VERSION_STRING
#define TREESYNC_STATE_VERSION "treesync " TREESYNC_VERSION_STRING
#else
#define TREESYNC_STATE_VERSION "treesync"
#endif

namespace treesync {
inline namespace v0 {

namespace detail {

/// One destination entry as a run left it.
struct entry_record {
  std::string name;
  file_type type = file_type::none;
  bool has_stat = false;  ///< `st` is what a stat of the entry returned (else: the type alone is known)
  stat_info st;
  bool has_target = false;  ///< a symlink's target, as read
  std::string target;
};

/// One destination directory a run completed: its own stat and its entries, sorted by name.
struct dir_record {
  stat_info self;
  bool settled = false;  ///< its stamps were older than the racy window when recorded (verify::dirs)
  std::vector<entry_record> entries;

  const entry_record* find(const std::string& name) const {
    const auto it = std::lower_bound(entries.begin(), entries.end(), name,
                                     [](const entry_record& e, const std::string& n) { return e.name < n; });
    return it != entries.end() && it->name == name ? &*it : nullptr;
  }
};

/// The records of a whole destination, keyed by relative path ("" is the root), and their text.
class manifest {
 public:
  std::string identity;
  std::map<std::string, dir_record> dirs;

  std::string serialize() const {
    std::string out = "treesync-state 1\nid ";
    escape(identity, out);
    out += '\n';
    for (const auto& [rel, d] : dirs) {
      out += "D ";
      if (rel.empty()) out += '/';
      escape(rel, out);
      number(d.settled ? 1 : 0, out);
      number(d.entries.size(), out);
      const stat_info& s = d.self;
      for (std::uint64_t v : {s.dev, s.ino, std::uint64_t(s.mode), std::uint64_t(s.uid), std::uint64_t(s.gid)}) number(v, out);
      number(s.mtime_ns, out);
      number(s.ctime_ns, out);
      out += '\n';
      for (const entry_record& e : d.entries) put_entry(e, out);
    }
    out += "end ";
    out += std::to_string(dirs.size());
    out += '\n';
    return out;
  }

  /// Parses `text`; false (and `dirs` empty) when it is not a complete state file.
  bool parse(std::string_view text) {
    dirs.clear();
    identity.clear();
    reader r{text};
    if (r.line() != "treesync-state 1") return false;
    std::string_view l = r.line();
    if (l.substr(0, 3) != "id ") return false;
    identity = unescape(l.substr(3));
    std::size_t count = 0;
    for (;;) {
      if (r.done()) return fail();
      l = r.line();
      if (l.substr(0, 4) == "end ") return to_size(l.substr(4)) == count && r.done() ? true : fail();
      if (!parse_dir(l, r)) return fail();
      ++count;
    }
  }

  static void escape(std::string_view s, std::string& out) {
    static const char hex[] = "0123456789ABCDEF";
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x21 || u == 0x7f || c == '%') {
        out += '%';
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
  }

  static std::string unescape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out += static_cast<char>(std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  }

 private:
  struct reader {
    std::string_view text;
    std::size_t pos = 0;
    bool done() const { return pos >= text.size(); }
    std::string_view line() {
      const std::size_t end = std::min(text.find('\n', pos), text.size());
      const std::string_view l = text.substr(pos, end - pos);
      pos = end + 1;
      return l;
    }
  };

  bool fail() {
    dirs.clear();
    return false;
  }

  template <class T>
  static void number(T v, std::string& out) {
    out += ' ';
    out += std::to_string(v);
  }

  static void put_entry(const entry_record& e, std::string& out) {
    out += "E ";
    escape(e.name, out);
    number(static_cast<int>(e.type), out);
    if (!e.has_stat) {
      out += " -";
    } else {
      const stat_info& s = e.st;
      number(s.size, out);
      number(s.mtime_ns, out);
      number(s.ctime_ns, out);
      for (std::uint64_t v : {std::uint64_t(s.mode), std::uint64_t(s.uid), std::uint64_t(s.gid), s.dev, s.ino, s.nlink, s.rdev})
        number(v, out);
    }
    if (e.has_target) {
      out += ' ';
      out += '%';  // a target may be empty: a leading % keeps the field non-empty
      escape(e.target, out);
    }
    out += '\n';
  }

  static std::vector<std::string_view> fields(std::string_view l) {
    std::vector<std::string_view> f;
    std::size_t pos = 0;
    while (pos <= l.size()) {
      const std::size_t end = std::min(l.find(' ', pos), l.size());
      f.push_back(l.substr(pos, end - pos));
      pos = end + 1;
    }
    return f;
  }

  static bool to_u64(std::string_view s, std::uint64_t& v) {
    if (s.empty()) return false;
    v = 0;
    for (const char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + std::uint64_t(c - '0');
    }
    return true;
  }
  static bool to_i64(std::string_view s, std::int64_t& v) {
    std::uint64_t u = 0;
    const bool neg = !s.empty() && s[0] == '-';
    if (!to_u64(neg ? s.substr(1) : s, u)) return false;
    v = neg ? -std::int64_t(u) : std::int64_t(u);
    return true;
  }
  static std::size_t to_size(std::string_view s) {
    std::uint64_t v = 0;
    return to_u64(s, v) ? std::size_t(v) : std::size_t(-1);
  }

  bool parse_dir(std::string_view l, reader& r) {
    const auto f = fields(l);
    if (f.size() != 11 || f[0] != "D") return false;
    const std::string rel = f[1] == "/" ? std::string() : unescape(f[1]);
    dir_record d;
    std::uint64_t settled = 0, count = 0, mode = 0, uid = 0, gid = 0;
    stat_info& s = d.self;
    s.type = file_type::directory;
    if (!to_u64(f[2], settled) || !to_u64(f[3], count) || !to_u64(f[4], s.dev) || !to_u64(f[5], s.ino) ||
        !to_u64(f[6], mode) || !to_u64(f[7], uid) || !to_u64(f[8], gid) || !to_i64(f[9], s.mtime_ns) ||
        !to_i64(f[10], s.ctime_ns))
      return false;
    s.mode = std::uint32_t(mode);
    s.uid = std::uint32_t(uid);
    s.gid = std::uint32_t(gid);
    d.settled = settled != 0;
    d.entries.reserve(count);
    for (std::uint64_t k = 0; k < count; ++k) {
      if (r.done()) return false;
      entry_record e;
      if (!parse_entry(r.line(), e)) return false;
      if (!d.entries.empty() && !(d.entries.back().name < e.name)) return false;
      d.entries.push_back(std::move(e));
    }
    return dirs.emplace(rel, std::move(d)).second;
  }

  static bool parse_entry(std::string_view l, entry_record& e) {
    const auto f = fields(l);
    if (f.size() < 4 || f[0] != "E" || f[1].empty()) return false;
    e.name = unescape(f[1]);
    std::uint64_t type = 0;
    if (!to_u64(f[2], type) || type > static_cast<std::uint64_t>(file_type::unknown)) return false;
    e.type = static_cast<file_type>(type);
    std::size_t next = 4;
    if (f[3] != "-") {
      if (f.size() < 13) return false;
      stat_info& s = e.st;
      std::uint64_t mode = 0, uid = 0, gid = 0;
      if (!to_u64(f[3], s.size) || !to_i64(f[4], s.mtime_ns) || !to_i64(f[5], s.ctime_ns) || !to_u64(f[6], mode) ||
          !to_u64(f[7], uid) || !to_u64(f[8], gid) || !to_u64(f[9], s.dev) || !to_u64(f[10], s.ino) ||
          !to_u64(f[11], s.nlink) || !to_u64(f[12], s.rdev))
        return false;
      s.type = e.type;
      s.mode = std::uint32_t(mode);
      s.uid = std::uint32_t(uid);
      s.gid = std::uint32_t(gid);
      e.has_stat = true;
      next = 13;
    }
    if (f.size() == next + 1) {
      if (f[next].empty() || f[next][0] != '%') return false;
      e.has_target = true;
      e.target = unescape(f[next].substr(1));
    } else if (f.size() != next) {
      return false;
    }
    return true;
  }
};

/// A run's state file: the records it was given (trusted as the verify level says), the records
/// it makes, and the file's removal before the first write.
template <class FS>
class state_keeper {
 public:
  state_keeper(FS& fs, const std::filesystem::path& path, verify_level level) : fs_(fs), path_(path), level_(level) {}

  bool enabled() const noexcept { return enabled_; }
  verify_level level() const noexcept { return level_; }
  const std::filesystem::path& path() const noexcept { return path_; }

  /// Reads the state file, before anything is written.  A missing file is no state; one that
  /// cannot be read is returned (a notice: the run goes on without it).
  std::error_code load() {
    if constexpr (!has_state_ops<FS>::value) {
      return {};
    } else {
      if (path_.empty()) return {};
      enabled_ = true;
      std::error_code ec;
      loaded_text_ = fs_.load_state(path_, ec);
      if (ec == std::errc::no_such_file_or_directory) return loaded_text_.clear(), std::error_code{};
      exists_ = !ec || ec != std::errc::no_such_file_or_directory;  // unreadable: still removed before a write
      if (ec) return loaded_text_.clear(), ec;
      return {};
    }
  }

  /// Whether the file read belongs to this run: one damaged or of another identity is ignored
  /// (errc::state_ignored, a notice) and never trusted.
  std::error_code check(const std::string& identity) {
    if (!exists_ || loaded_text_.empty()) return {};
    if (!old_.parse(loaded_text_) || old_.identity != identity) {
      old_.dirs.clear();
      return errc::state_ignored;
    }
    trusted_ = level_ != verify_level::full;
    return {};
  }

  /// The records are not trusted after all (the destination root is not the one recorded).
  void distrust() noexcept { trusted_ = false; }

  /// No state file is kept for this run (one that exists is still removed before the first write).
  void disable() noexcept { keep_ = false; }
  bool keeps() const noexcept { return enabled_ && keep_; }

  /// The record of the destination directory at `rel`, when the run may take its entries from it.
  const dir_record* record(const std::string& rel) const {
    if (!trusted_) return nullptr;
    const auto it = old_.dirs.find(rel);
    return it == old_.dirs.end() ? nullptr : &it->second;
  }

  /// Before the run's first write: the state file goes, so that a run killed from here on leaves
  /// none.  False (and the run must not write) when it cannot be removed.
  bool before_write(std::error_code& ec) {
    if (!exists_ || dropped_.load(std::memory_order_acquire)) return drop_ok_;
    std::lock_guard<std::mutex> lock(mu_);
    if (dropped_.load()) return drop_ok_;
    if constexpr (has_state_ops<FS>::value) fs_.drop_state(path_, ec);
    if (ec == std::errc::no_such_file_or_directory) ec.clear();
    drop_ok_ = !ec;
    dropped_.store(true, std::memory_order_release);
    return drop_ok_;
  }
  bool wrote() const noexcept { return dropped_.load(); }

  /// A completed directory's record, for the file written at the end.
  void put(const std::string& rel, dir_record&& d) {
    std::lock_guard<std::mutex> lock(mu_);
    next_.dirs[rel] = std::move(d);
  }

  /// The records of these directories are dropped (something in them failed).
  void forget(const std::string& rel) {
    std::lock_guard<std::mutex> lock(mu_);
    next_.dirs.erase(rel);
  }

  /// Writes the new state file, unless it would say what the one already there says.
  std::error_code save(const std::string& identity, bool& written) {
    written = false;
    if (!enabled_ || !keep_) return {};
    next_.identity = identity;
    const std::string text = next_.serialize();
    if (exists_ && !dropped_.load() && text == loaded_text_) return {};
    std::error_code ec;
    if constexpr (has_state_ops<FS>::value) fs_.save_state(path_, text, ec);
    written = !ec;
    return ec;
  }

 private:
  FS& fs_;
  std::filesystem::path path_;
  verify_level level_;
  bool enabled_ = false;
  bool keep_ = true;
  bool exists_ = false;
  bool trusted_ = false;
  std::string loaded_text_;
  manifest old_;
  manifest next_;
  std::mutex mu_;
  std::atomic<bool> dropped_{false};
  bool drop_ok_ = true;
};

/// What a state file is tied to: the format and treesync's version, the two roots, the policy
/// types and the switches that change what a run leaves in the destination, the time model.
template <class Cmp, class Del, class Lnk, class Exc>
std::string state_identity(const std::string& version, const std::filesystem::path& src, const std::filesystem::path& dst,
                           const options& o, const time_model& t) {
  std::string id = version;
  const auto add = [&id](std::string_view s) {
    id += '\n';
    id += s;
  };
  add(src.string());
  add(dst.string());
  add(typeid(Cmp).name());
  add(typeid(Del).name());
  add(typeid(Lnk).name());
  add(typeid(Exc).name());
  const bool flags[] = {o.specials, o.owner, o.group, o.xattrs, o.one_file_system, o.write == write_mode::atomic};
  std::string f;
  for (const bool b : flags) f += b ? '1' : '0';
  add(f);
  add(o.subtree);
  add(std::to_string(o.frontier_depth));
  add(std::to_string(t.resolution_ns) + (t.ctime ? " ctime" : " no-ctime"));
  return id;
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_MANIFEST_HPP
