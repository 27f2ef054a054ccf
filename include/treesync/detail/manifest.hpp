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
#include <deque>

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
// The format is text, one record per line, fields separated by one space, names and targets
// with bytes below 0x21, 0x7f and '%' escaped as %XX.  Directories come depth first, each after
// its parent, and carry their depth and their own name only (never a path):
//   treesync-state 2
//   id <escaped identity: version, source, destination, policy set, time model>
//   D <depth> <name, "/" for the root> <settled 0|1> <entries> <dev> <ino> <mode> <uid> <gid> <mtime> <ctime>
//   E <name> <type> - | <size> <mtime> <ctime> <mode> <uid> <gid> <dev> <ino> <nlink> <rdev>  [%<target>]
//   P <depth> <name, "/" for the root>   (a directory with no record of its own, above recorded ones)
//   end <directories>
// A directory at depth d is a subdirectory of the last directory at depth d-1; a recorded
// parent must list it as a directory entry.
//
// A state file is input anyone with write access to it may have written: it is read as such.
// Every line is checked before anything is taken from it (a name is one path component: not
// empty, no '/', no NUL, not "." or ".."; numbers in range, no overflow; entries sorted and
// unique); a line longer than max_state_line or any violation rejects the whole file, and the
// defect names the line and the reason.  The file is read in pieces (manifest_reader), never
// whole; with names instead of paths, a deep tree's file is linear in its depth.
//
// Memory: the records are held for the whole run (any directory may be reached at any time, by
// any worker), and a record costs more than its line: about 176 bytes an entry for a line that
// may be 15 ("E ~0000001 1 -"): a crafted file of 64 MiB held 1.6-2.3 GB.  Parsing one record at
// a time instead would need the walk to follow the file's order (it does not: jobs, frontier)
// and would still hold one directory's record whole, so the records are capped instead: the
// reader counts what they take (manifest_reader::charge: each record's size and the heap of its
// names; an entry count is checked against what is left before the entries are reserved, once,
// exactly), and past the cap (state_file::max_memory, CLI --state-memory; default_state_memory:
// 256 MiB, about 1.3 million entries with stats) it stops with a defect marked too_large: the
// file is ignored like a damaged one (errc::state_ignored, "too large: ..."), removed before the
// first write, and the run reads the destination in full.  A true record of a tree that big is
// ignored the same (the notice says so; raise the cap).  The run's own copies of a record it
// takes a listing from (walker: the listing, the merge; the deletions it defers) are at most
// about as much again, so a run holding a file at the cap peaks near twice the cap.  A
// std::bad_alloc while the file is read (an address-space limit below the cap) is the same
// refusal ("too large: it could not be held in memory"), never an exception out of the run; a
// cap raised above what the process can allocate is the caller's to answer for (the walk's own
// allocations are not caught).

/// What a state file's identity calls this version of treesync.
#ifdef TREESYNC_VERSION_STRING
#define TREESYNC_STATE_VERSION "treesync " TREESYNC_VERSION_STRING
#else
#define TREESYNC_STATE_VERSION "treesync"
#endif

namespace treesync {
inline namespace v0 {

namespace detail {

inline constexpr std::size_t no_record = static_cast<std::size_t>(-1);

/// The longest line a state file may hold (an escaped name or link target is at most three times
/// its length; an identity holds two paths).
inline constexpr std::size_t max_state_line = std::size_t(1) << 16;

/// One destination entry as a run left it.
struct entry_record {
  std::string name;
  file_type type = file_type::none;
  bool has_stat = false;  ///< `st` is what a stat of the entry returned (else: the type alone is known)
  stat_info st;
  bool has_target = false;  ///< a symlink's target, as read
  std::string target;
  std::size_t sub = no_record;  ///< a directory entry's own record (manifest::dirs), once parsed
};

/// One destination directory: where it is (its parent's index and its own name) and, when
/// `listed`, its own stat and its entries, sorted by name.  One that is not listed is only on the
/// way to recorded directories below it: its entries name those, nothing else is known of it.
struct dir_record {
  std::size_t parent = no_record;  ///< index in manifest::dirs; no_record for the root
  std::string name;                ///< its name in its parent ("" for the root)
  bool listed = false;
  bool settled = false;  ///< its stamps were older than the racy window when recorded (verify::dirs)
  stat_info self;
  std::vector<entry_record> entries;
  /// The record as text (what follows the name on its D line, then its E lines), instead of
  /// `self` and `entries`: how the records a run makes are kept until they are written.
  std::string body;

  const entry_record* find(std::string_view n) const {
    const auto it = std::lower_bound(entries.begin(), entries.end(), n,
                                     [](const entry_record& e, std::string_view x) { return e.name < x; });
    return it != entries.end() && it->name == n ? &*it : nullptr;
  }
};

/// Why a state file was not taken: the line (1-based; 0 when it is the file as a whole) and the
/// reason.
struct state_defect {
  std::size_t line = 0;
  std::string reason;
  bool too_large = false;  ///< not a defect of the text: its records need more memory than they may take
  std::string text() const { return line ? "line " + std::to_string(line) + ": " + reason : reason; }
};

/// Whether `name` can be one entry of a directory: a single path component.
inline bool is_component(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

/// The records of a whole destination (dirs[0] is the root; a directory comes after its parent)
/// and their text.
class manifest {
 public:
  std::string identity;
  std::deque<dir_record> dirs;  // never moved as it grows: no copy at twice the size, stable addresses

  /// A directory below `parent` (the root: no_record and ""); its index.
  std::size_t add(std::size_t parent, std::string name) {
    dir_record d;
    d.parent = parent;
    d.name = std::move(name);
    dirs.push_back(std::move(d));
    return dirs.size() - 1;
  }

  const dir_record* root() const { return dirs.empty() ? nullptr : &dirs.front(); }

  /// The record of `parent`'s subdirectory `name` (parsed manifests only).
  const dir_record* child(const dir_record& parent, std::string_view name) const {
    const entry_record* e = parent.find(name);
    return e && e->sub != no_record ? &dirs[e->sub] : nullptr;
  }

  /// The record of the directory at relative path `rel` ("" is the root), parsed manifests only.
  const dir_record* find(std::string_view rel) const {
    const dir_record* d = root();
    while (d && !rel.empty()) {
      const std::size_t slash = rel.find('/');
      d = child(*d, rel.substr(0, slash));
      rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
    }
    return d;
  }

  /// The relative path of dirs[i] ("" for the root), from the names up its parents.
  std::string path_of(std::size_t i) const {
    std::vector<const std::string*> names;
    for (; i != no_record && i < dirs.size() && dirs[i].parent != no_record; i = dirs[i].parent) names.push_back(&dirs[i].name);
    std::string rel;
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      if (!rel.empty()) rel += '/';
      rel += **it;
    }
    return rel;
  }

  /// The text: directories depth first, siblings by name; a directory not listed is written (as
  /// P) only when a listed one lies below it, and a subtree whose listed parent does not list it
  /// as a directory is left out (the file must parse).  No recursion: a chain of any depth.
  std::string serialize() const {
    std::string out = "treesync-state 2\nid ";
    escape(identity, out);
    out += '\n';
    std::size_t written = 0;
    if (!dirs.empty()) {
      std::vector<std::vector<std::size_t>> kids(dirs.size());
      std::vector<char> needed(dirs.size(), 0);
      for (std::size_t i = dirs.size(); i-- > 0;) {
        needed[i] = needed[i] || dirs[i].listed;
        const std::size_t p = dirs[i].parent;
        if (i == 0 || p >= i) continue;  // a parent always comes first; anything else is not reachable
        if (dirs[p].listed && dirs[p].body.empty()) {
          const entry_record* e = dirs[p].find(dirs[i].name);
          if (!e || e->type != file_type::directory || !is_component(dirs[i].name)) continue;
        }
        if (!needed[i]) continue;
        kids[p].push_back(i);
        needed[p] = 1;
      }
      std::size_t size = out.size() + 32;  // one allocation for the whole text, not a doubling
      for (std::size_t i = 0; i < dirs.size(); ++i)
        if (needed[i]) size += 32 + 3 * dirs[i].name.size() + (dirs[i].body.empty() ? 120 * dirs[i].entries.size() + 120 : dirs[i].body.size());
      out.reserve(size);
      std::vector<std::pair<std::size_t, std::size_t>> stack;  // (directory, next child)
      if (needed[0]) {
        put_dir(dirs[0], 0, out);
        written = 1;
        stack.push_back({0, 0});
      }
      while (!stack.empty()) {
        auto& [d, next] = stack.back();
        std::vector<std::size_t>& k = kids[d];
        if (next == 0)
          std::sort(k.begin(), k.end(), [this](std::size_t a, std::size_t b) { return dirs[a].name < dirs[b].name; });
        if (next == k.size()) {
          stack.pop_back();
          continue;
        }
        const std::size_t c = k[next++];
        put_dir(dirs[c], stack.size(), out);
        ++written;
        stack.push_back({c, 0});
      }
    }
    out += "end ";
    out += std::to_string(written);
    out += '\n';
    return out;
  }

  /// Parses a whole text; false (and `dirs` empty, `why` saying where and why) when it is not a
  /// complete and valid state file, or its records need more memory than `budget`.
  bool parse(std::string_view text, state_defect* why = nullptr, std::uint64_t budget = default_state_memory);

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

  /// The bytes `s` stands for; false when an escape is malformed or a byte that is always escaped
  /// appears raw.
  static bool unescape(std::string_view s, std::string& out) {
    out.clear();
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto u = static_cast<unsigned char>(s[i]);
      if (u < 0x21 || u == 0x7f) return false;
      if (s[i] != '%') {
        out += s[i];
        continue;
      }
      if (i + 2 >= s.size()) return false;
      const int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    return true;
  }

 private:
  static int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  template <class T>
  static void number(T v, std::string& out) {
    out += ' ';
    out += std::to_string(v);
  }

  void put_dir(const dir_record& d, std::size_t depth, std::string& out) const {
    out += d.listed ? "D" : "P";
    number(depth, out);
    out += ' ';
    if (depth == 0)
      out += '/';
    else
      escape(d.name, out);
    if (!d.listed) {
      out += '\n';
    } else if (!d.body.empty()) {
      out += d.body;
    } else {
      put_body(d, out);
    }
  }

 public:
  /// A listed record's text after its name: its D line's fields, then its E lines.
  static void put_body(const dir_record& d, std::string& out) {
    put_head(d, d.entries.size(), out);
    for (const entry_record& e : d.entries) put_entry(e, out);
  }
  /// The rest of a D line after the name, for a directory of `count` entries.
  static void put_head(const dir_record& d, std::size_t count, std::string& out) {
    number(d.settled ? 1 : 0, out);
    number(count, out);
    const stat_info& s = d.self;
    for (std::uint64_t v : {s.dev, s.ino, std::uint64_t(s.mode), std::uint64_t(s.uid), std::uint64_t(s.gid)})
      number(v, out);
    number(s.mtime_ns, out);
    number(s.ctime_ns, out);
    out += '\n';
  }
  /// One entry's E line.
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
};

/// Reads a state file piece by piece into a manifest, checking every line (see the format above).
/// feed() the file's bytes in pieces of any size, then finish(); either returns false at the
/// first defect (defect() says which line and why), after which the manifest is empty.
class manifest_reader {
 public:
  /// `budget`: the most memory, in bytes, the records may take (see charge); past it the reader
  /// stops with a defect marked too_large.  Never unbounded: an entry count is reserved for once
  /// it fits (manifest::parse, the fuzz target: the default cap).
  explicit manifest_reader(manifest& m, std::uint64_t budget = default_state_memory) : m_(m), budget_(budget) {
    m_.dirs.clear();
    m_.identity.clear();
  }

  /// The memory the records read so far take, about (what charge counted).
  std::uint64_t held() const noexcept { return held_; }

  /// A std::bad_alloc was thrown while a piece was fed: the records go, and the reader stops as
  /// past its budget.
  void out_of_memory() {
    m_.dirs.clear();
    m_.dirs.shrink_to_fit();
    m_.identity.clear();
    m_.identity.shrink_to_fit();
    ok_ = false;
    defect_.line = line_;
    defect_.too_large = true;
    defect_.reason = "it could not be held in memory (std::bad_alloc)";
  }

  bool feed(std::string_view bytes) {
    while (ok_ && !bytes.empty()) {
      const std::size_t nl = bytes.find('\n');
      const std::string_view piece = bytes.substr(0, nl);
      if (pending_.size() + piece.size() > max_state_line)
        return ++line_, fail("longer than " + std::to_string(max_state_line) + " bytes");
      if (nl == std::string_view::npos) {
        pending_.append(piece.data(), piece.size());
        return true;
      }
      ++line_;
      if (pending_.empty()) {
        take(piece);
      } else {
        pending_.append(piece.data(), piece.size());
        take(pending_);
        pending_.clear();
      }
      bytes.remove_prefix(nl + 1);
    }
    return ok_;
  }

  bool finish() {
    if (!ok_) return false;
    if (!pending_.empty()) return ++line_, fail("the last line has no end (the file is truncated)");
    if (stage_ != stage::done) return line_ = 0, fail("the file ends before its \"end\" line (truncated)");
    return true;
  }

  const state_defect& defect() const noexcept { return defect_; }

 private:
  enum class stage { header, id, dirs, entries, done };

  bool fail(std::string reason) {
    if (!ok_) return false;
    ok_ = false;
    m_.dirs.clear();
    m_.dirs.shrink_to_fit();
    m_.identity.clear();
    defect_.line = line_;
    defect_.reason = std::move(reason);
    return false;
  }

  // The heap a string takes beyond its own object (none while it fits in the object).
  static std::uint64_t heap_of(const std::string& s) noexcept {
    return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
  }

  // `bytes` more held by the records: false (and the reader stopped, too_large) past the budget.
  bool charge(std::uint64_t bytes) {
    if (bytes > budget_ - held_) return too_large();
    held_ += bytes;
    return true;
  }
  // `n` more entry records (an entry count, checked before anything is reserved for it: a count
  // of 2^64 - 1 is past any budget, and past what a vector can hold, not an allocation).
  bool charge_entries(std::uint64_t n) {
    const std::uint64_t room = std::min<std::uint64_t>(budget_ - held_, PTRDIFF_MAX);
    if (n > room / sizeof(entry_record)) return too_large();
    return charge(n * sizeof(entry_record));
  }
  bool too_large() {
    fail("its records need more than " + size_text(budget_) + " of memory (the cap: state_file::max_memory)");
    defect_.too_large = true;
    return false;
  }
  static std::string size_text(std::uint64_t b) {
    return b % (std::uint64_t(1) << 20) == 0 ? std::to_string(b >> 20) + " MiB" : std::to_string(b) + " bytes";
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

  static bool to_u64(std::string_view s, std::uint64_t& v, std::uint64_t max = std::uint64_t(-1)) {
    if (s.empty() || s.size() > 20) return false;
    v = 0;
    for (const char c : s) {
      if (c < '0' || c > '9') return false;
      const auto d = std::uint64_t(c - '0');
      if (d > max || v > (max - d) / 10) return false;
      v = v * 10 + d;
    }
    return true;
  }
  static bool to_i64(std::string_view s, std::int64_t& v) {
    const bool neg = !s.empty() && s[0] == '-';
    std::uint64_t u = 0;
    const std::uint64_t max = neg ? std::uint64_t(INT64_MAX) + 1 : std::uint64_t(INT64_MAX);
    if (!to_u64(neg ? s.substr(1) : s, u, max)) return false;
    v = neg ? (u == std::uint64_t(INT64_MAX) + 1 ? INT64_MIN : -std::int64_t(u)) : std::int64_t(u);
    return true;
  }
  static bool to_u32(std::string_view s, std::uint32_t& v) {
    std::uint64_t u = 0;
    if (!to_u64(s, u, 0xffffffffu)) return false;
    v = std::uint32_t(u);
    return true;
  }

  bool name_field(std::string_view f, std::string& out, const char* what) {
    if (!manifest::unescape(f, out)) return fail(std::string("malformed escape in ") + what);
    if (!is_component(out)) return fail(std::string(what) + " is not a single path component (empty, \".\", \"..\", or holds '/' or NUL)");
    return true;
  }

  void take(std::string_view l) {
    switch (stage_) {
      case stage::header:
        if (l == "treesync-state 2") stage_ = stage::id;
        else if (l.substr(0, 15) == "treesync-state ") fail("another version of the format (" + std::string(l.substr(15, 16)) + ")");
        else fail("not a treesync state file");
        return;
      case stage::id:
        if (l.substr(0, 3) != "id ") return (void)fail("no identity line");
        if (!manifest::unescape(l.substr(3), m_.identity)) return (void)fail("malformed escape in the identity");
        if (!charge(heap_of(m_.identity))) return;
        stage_ = stage::dirs;
        return;
      case stage::entries:
        if (l.substr(0, 2) != "E ") return (void)fail("an entry line (E) expected: the directory holds more entries");
        return entry(l);
      case stage::dirs:
        if (l.substr(0, 4) == "end ") return end(l.substr(4));
        if (l.substr(0, 2) == "D " || l.substr(0, 2) == "P ") return dir(l);
        return (void)fail("a directory line (D, P) or \"end\" expected");
      case stage::done:
        return (void)fail("data after the \"end\" line");
    }
  }

  void end(std::string_view n) {
    std::uint64_t count = 0;
    if (!to_u64(n, count) || count != m_.dirs.size()) return (void)fail("the directory count does not match");
    stage_ = stage::done;
  }

  // A directory record below the root, at `depth`, named by `name_text`: its parent is the last
  // directory of depth - 1, which lists it (listed) or gets it as a directory entry (unlisted,
  // names in order).  False after fail().
  bool attach(dir_record& d, std::uint64_t depth, std::string_view name_text) {
    if (depth > path_.size()) return fail("a directory deeper than its parent's depth + 1");
    if (!name_field(name_text, d.name, "the directory name")) return false;
    path_.resize(depth);
    d.parent = path_.back();
    dir_record& parent = m_.dirs[d.parent];
    if (parent.listed) {
      const auto it = std::lower_bound(parent.entries.begin(), parent.entries.end(), d.name,
                                       [](const entry_record& e, const std::string& x) { return e.name < x; });
      if (it == parent.entries.end() || it->name != d.name || it->type != file_type::directory)
        return fail("the parent does not list it as a directory");
      if (it->sub != no_record) return fail("a directory recorded twice");
      it->sub = m_.dirs.size();
      return true;
    }
    if (!parent.entries.empty() && !(parent.entries.back().name < d.name))
      return fail("directories below an unlisted one are not sorted by name");
    std::vector<entry_record>& kids = parent.entries;
    if (kids.size() == kids.capacity()) {  // grown here, by doubling: the growth is charged first
      const std::size_t more = std::max<std::size_t>(4, kids.capacity());
      if (!charge_entries(more)) return false;
      kids.reserve(kids.capacity() + more);
    }
    entry_record e;
    e.name = d.name;
    e.type = file_type::directory;
    e.sub = m_.dirs.size();
    if (!charge(heap_of(e.name))) return false;
    kids.push_back(std::move(e));
    return true;
  }

  void dir(std::string_view l) {
    const auto f = fields(l);
    const bool listed = f[0] == "D";
    if (f.size() != (listed ? 12u : 3u)) return (void)fail(listed ? "a D line has 12 fields" : "a P line has 3 fields");
    std::uint64_t depth = 0;
    if (!to_u64(f[1], depth)) return (void)fail("bad depth");
    dir_record d;
    d.listed = listed;
    if (depth == 0) {
      if (!m_.dirs.empty()) return (void)fail("a second root");
      if (f[2] != "/") return (void)fail("the root is not named \"/\"");
    } else if (!attach(d, depth, f[2])) {
      return;
    }
    if (listed) {
      std::uint64_t settled = 0;
      stat_info& s = d.self;
      s.type = file_type::directory;
      if (!to_u64(f[3], settled, 1) || !to_u64(f[4], remaining_) || !to_u64(f[5], s.dev) || !to_u64(f[6], s.ino) ||
          !to_u32(f[7], s.mode) || !to_u32(f[8], s.uid) || !to_u32(f[9], s.gid) || !to_i64(f[10], s.mtime_ns) ||
          !to_i64(f[11], s.ctime_ns))
        return (void)fail("a number out of range in a D line");
      d.settled = settled != 0;
    }
    // the record, and (listed) its entries: the count is checked against the budget before its
    // records are reserved, exactly (no doubling; a count the file does not hold is a defect)
    if (!charge(sizeof(dir_record) + sizeof(std::size_t) + heap_of(d.name)) || (listed && !charge_entries(remaining_)))
      return;
    if (listed) d.entries.reserve(static_cast<std::size_t>(remaining_));
    if (depth == 0) path_.clear();
    path_.push_back(m_.dirs.size());
    m_.dirs.push_back(std::move(d));
    stage_ = listed && remaining_ > 0 ? stage::entries : stage::dirs;
  }

  void entry(std::string_view l) {
    const auto f = fields(l);
    if (f.size() < 4) return (void)fail("an E line has at least 4 fields");
    entry_record e;
    if (!name_field(f[1], e.name, "the entry name")) return;
    std::uint64_t type = 0;
    if (!to_u64(f[2], type, static_cast<std::uint64_t>(file_type::unknown)) || type == 0)
      return (void)fail("bad entry type");
    e.type = static_cast<file_type>(type);
    std::size_t next = 4;
    if (f[3] != "-") {
      if (f.size() < 13) return (void)fail("an E line with a stat has at least 13 fields");
      stat_info& s = e.st;
      if (!to_u64(f[3], s.size, std::uint64_t(INT64_MAX)) || !to_i64(f[4], s.mtime_ns) || !to_i64(f[5], s.ctime_ns) ||
          !to_u32(f[6], s.mode) || !to_u32(f[7], s.uid) || !to_u32(f[8], s.gid) || !to_u64(f[9], s.dev) ||
          !to_u64(f[10], s.ino) || !to_u64(f[11], s.nlink) || !to_u64(f[12], s.rdev))
        return (void)fail("a number out of range in an E line");
      s.type = e.type;
      e.has_stat = true;
      next = 13;
    }
    if (f.size() == next + 1) {
      if (f[next].empty() || f[next][0] != '%') return (void)fail("a link target starts with '%'");
      if (e.type != file_type::symlink) return (void)fail("a link target on an entry that is not a link");
      if (!manifest::unescape(f[next].substr(1), e.target)) return (void)fail("malformed escape in a link target");
      if (e.target.find('\0') != std::string::npos) return (void)fail("a link target holds NUL");
      e.has_target = true;
    } else if (f.size() != next) {
      return (void)fail("too many fields in an E line");
    }
    std::vector<entry_record>& entries = m_.dirs.back().entries;
    if (!entries.empty() && !(entries.back().name < e.name)) return (void)fail("entries not sorted by name, or one named twice");
    if (!charge(heap_of(e.name) + heap_of(e.target))) return;  // the record itself was charged with its directory
    entries.push_back(std::move(e));
    if (--remaining_ == 0) stage_ = stage::dirs;
  }

  manifest& m_;
  std::uint64_t budget_;
  std::uint64_t held_ = 0;
  bool ok_ = true;
  stage stage_ = stage::header;
  std::size_t line_ = 0;
  std::string pending_;
  std::vector<std::size_t> path_;  // the directories from the root down to the last one read
  std::uint64_t remaining_ = 0;    // entry lines still due in the current directory
  state_defect defect_;
};

inline bool manifest::parse(std::string_view text, state_defect* why, std::uint64_t budget) {
  manifest_reader r(*this, budget);
  const bool ok = r.feed(text) && r.finish();
  if (!ok && why) *why = r.defect();
  return ok;
}

/// A run's state file: the records it was given (trusted as the verify level says), the records
/// it makes, and the file's removal before the first write.  Every operation on the file goes
/// through the handle of its directory (see engine: outside the destination, its parent as named;
/// inside, entered from the destination root without following a link) and its name.
template <class FS>
class state_keeper {
 public:
  using handle = typename FS::dir_handle;

  /// `budget`: the most memory the records read may take (state_file::max_memory).
  state_keeper(FS& fs, const std::filesystem::path& path, verify_level level, std::string subtree,
               std::uint64_t budget = default_state_memory)
      : fs_(fs), path_(path), level_(level), subtree_(std::move(subtree)), budget_(budget) {}

  bool enabled() const noexcept { return enabled_; }
  verify_level level() const noexcept { return level_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  bool attached() const noexcept { return attached_; }
  handle& dir() noexcept { return dir_; }

  /// Reads the state file `name` in `dir`, before anything is written, piece by piece into its
  /// records.  A missing file is no state.  An error (errc::state_not_regular for anything but a
  /// regular file, or why it could not be read) is the caller's to refuse the run with: such a
  /// file is never removed or replaced.  One whose records need more memory than the budget, or
  /// more than there is (std::bad_alloc), is read no further and ignored (check: "too large").
  std::error_code load(handle dir, const std::string& name) {
    attach(std::move(dir), name);
    if constexpr (has_state_ops<FS>::value) {
      std::error_code ec;
      manifest_reader reader(old_, budget_);
      bool damaged = false;
      const auto feed = [&](std::string_view piece) {
        try {
          if (!reader.feed(piece)) damaged = true;
        } catch (const std::bad_alloc&) {
          reader.out_of_memory();
          damaged = true;
        }
      };
      try {
        fs_.read_state(dir_, name_, [&](std::string_view piece) {
          size_ += piece.size();
          hash_ = fnv(hash_, piece);
          if (!damaged) feed(piece);
          return !damaged;  // a damaged file is not read further: it will be replaced
        }, ec);
      } catch (const std::bad_alloc&) {  // the filesystem's own buffers
        if (!damaged) reader.out_of_memory();
        damaged = true;
        ec.clear();
      }
      if (is_missing(ec)) return old_ = manifest{}, std::error_code{};
      if (ec) return old_ = manifest{}, ec;
      exists_ = true;
      if (!damaged && !reader.finish()) damaged = true;
      if (damaged) {
        old_ = manifest{};
        defect_ = reader.defect();
      }
      parsed_ = !damaged;
    }
    return {};
  }

  /// The state file `name` in `dir`, with nothing to read (inside a destination this run makes).
  void attach(handle dir, const std::string& name) {
    enabled_ = true;
    attached_ = true;
    dir_ = std::move(dir);
    name_ = name;
  }

  /// Whether the file read belongs to this run: one damaged or of another identity is ignored
  /// (errc::state_ignored, with `why` saying which) and never trusted.
  std::error_code check(const std::string& identity, std::string& why) {
    if (!exists_) return {};
    if (!parsed_) return why = (defect_.too_large ? "too large: " : "damaged: ") + defect_.text(), errc::state_ignored;
    if (old_.identity != identity) {
      why = identity_difference(old_.identity, identity);
      old_ = manifest{};
      return errc::state_ignored;
    }
    trusted_ = level_ != verify_level::full;
    if (!trusted_) old_ = manifest{};  // verify::full reads every directory: the records are not needed
    return {};
  }

  /// The records are not trusted after all (the destination root is not the one recorded).
  void distrust() noexcept { trusted_ = false; }

  /// No state file is kept for this run (one that exists is still removed before the first write).
  void disable() noexcept { keep_ = false; }
  bool keeps() const noexcept { return enabled_ && keep_ && attached_; }

  /// An entry the run set out to delete was not there (a removal met ENOENT): not a deletion.
  /// Under verify::none (or dirs) a record may list names the destination no longer has; each
  /// costs its removal's system call, and all of them one notice at the end (note_gone).
  void gone() noexcept { gone_.fetch_add(1, std::memory_order_relaxed); }
  std::size_t gone_count() const noexcept { return gone_.load(std::memory_order_relaxed); }
  /// The notice for the entries gone, once for the run, when listings were taken from the records
  /// (without them, an entry gone between the listing and its removal is someone else's doing).
  void note_gone(report& out) const {
    const std::size_t n = gone_count();
    if (!n || !trusted_) return;
    out.notices.push_back({path_.string(), operation::state, errc::state_entries_gone, side::destination,
                           std::to_string(n) + (n == 1 ? " entry it recorded was" : " entries it recorded were") +
                               " no longer in the destination"});
  }

  /// The record of the destination root, when the run may take records from the file.
  const dir_record* root() const { return trusted_ ? old_.root() : nullptr; }
  /// The record of a recorded directory's subdirectory `name`.
  const dir_record* child(const dir_record* parent, std::string_view name) const {
    return parent ? old_.child(*parent, name) : nullptr;
  }

  /// Before the run's first write: the state file goes, so that a run killed from here on leaves
  /// none.  False (and the run must not write) when it cannot be removed.
  bool before_write(std::error_code& ec) {
    if (!exists_ || dropped_.load(std::memory_order_acquire)) return drop_ok_;
    std::lock_guard<std::mutex> lock(mu_);
    if (dropped_.load()) return drop_ok_;
    if constexpr (has_state_ops<FS>::value) fs_.drop_state(dir_, name_, ec);
    if (is_missing(ec)) ec.clear();
    drop_ok_ = !ec;
    dropped_.store(true, std::memory_order_release);
    return drop_ok_;
  }
  bool wrote() const noexcept { return dropped_.load(); }

  /// The place of a node's directory in the records written at the end (its ancestors get theirs
  /// first: a record names its parent and its own name, never a path).
  template <class Node>
  std::size_t slot(Node& n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (n.slot != no_record) return n.slot;
    std::vector<Node*> chain;
    for (Node* a = &n; a && a->slot == no_record; a = a->parent) chain.push_back(a);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Node* a = *it;
      a->slot = next_.add(a->parent ? a->parent->slot : no_record, a->parent ? a->name : std::string());
    }
    return n.slot;
  }

  /// A completed directory's record, for the file written at the end.
  /// `d`'s own fields, and its `count` entries as their E lines, sorted by name.
  void put(std::size_t slot, const dir_record& d, std::size_t count, const std::string& entry_lines) {
    std::string body;  // kept as text: a third of the memory of the records themselves
    manifest::put_head(d, count, body);
    body += entry_lines;
    std::lock_guard<std::mutex> lock(mu_);
    dir_record& r = next_.dirs[slot];
    r.listed = true;
    r.body = std::move(body);
  }

  /// A directory's record will not be read again (its entries are all processed): its entries'
  /// memory goes (on a deep chain, every directory above the one at hand is such a one).
  void release(const dir_record* r) {
    if (!r) return;
    std::vector<entry_record>().swap(const_cast<dir_record*>(r)->entries);
  }

  /// The records of the directories on the way to `rel` (relative to the roots, the subtree
  /// included), the root's among them, are dropped: something there failed.
  void forget(std::string_view rel) {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_.dirs.empty()) return;
    next_.dirs[0].listed = false;
    if (!subtree_.empty()) {
      if (rel.substr(0, subtree_.size()) != subtree_ || (rel.size() > subtree_.size() && rel[subtree_.size()] != '/')) return;
      rel.remove_prefix(std::min(rel.size(), subtree_.size() + 1));
    }
    if (by_parent_.size() != next_.dirs.size()) {  // (parent, name) order, to find a child by name
      by_parent_.resize(next_.dirs.size());
      for (std::size_t i = 0; i < by_parent_.size(); ++i) by_parent_[i] = i;
      std::sort(by_parent_.begin(), by_parent_.end(), [this](std::size_t a, std::size_t b) { return key(a) < key(b); });
    }
    std::size_t cur = 0;
    while (!rel.empty()) {
      const std::size_t slash = rel.find('/');
      const std::string_view comp = rel.substr(0, slash);
      rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
      const auto it = std::lower_bound(by_parent_.begin(), by_parent_.end(), std::make_pair(cur, comp),
                                       [this](std::size_t a, const std::pair<std::size_t, std::string_view>& k) { return key(a) < k; });
      if (it == by_parent_.end() || key(*it) != std::make_pair(cur, comp)) return;
      cur = *it;
      next_.dirs[cur].listed = false;
    }
  }

  /// Writes the new state file, unless it would say what the one already there says.
  std::error_code save(const std::string& identity, bool& written) {
    written = false;
    if (!keeps()) return {};
    old_ = manifest{};  // the run is over: what was read is not needed any more
    next_.identity = identity;
    const std::string text = next_.serialize();
    if (exists_ && parsed_ && !dropped_.load() && text.size() == size_ && fnv(fnv_basis, text) == hash_) return {};
    std::error_code ec;
    if constexpr (has_state_ops<FS>::value) fs_.save_state(dir_, name_, text, ec);
    written = !ec;
    return ec;
  }

 private:
  static constexpr std::uint64_t fnv_basis = 14695981039346656037ull;
  static std::uint64_t fnv(std::uint64_t h, std::string_view s) noexcept {
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
  }
  static bool is_missing(const std::error_code& ec) noexcept { return ec == std::errc::no_such_file_or_directory; }

  std::pair<std::size_t, std::string_view> key(std::size_t i) const { return {next_.dirs[i].parent, next_.dirs[i].name}; }

  // Which part of the identity (state_identity's lines) differs.
  static std::string identity_difference(const std::string& was, const std::string& is) {
    static const char* const part[] = {"version",    "source",     "destination", "policy set", "policy set", "policy set",
                                       "policy set", "policy set", "policy set",  "policy set", "time model (the destination's timestamps)"};
    std::size_t a = 0, b = 0;
    for (std::size_t k = 0;; ++k) {
      const std::size_t ea = std::min(was.find('\n', a), was.size()), eb = std::min(is.find('\n', b), is.size());
      if (was.compare(a, ea - a, is, b, eb - b) != 0 || (ea == was.size()) != (eb == is.size()))
        return std::string("it belongs to another ") + (k < sizeof part / sizeof *part ? part[k] : "policy set");
      if (ea == was.size()) return "it belongs to another mirror";
      a = ea + 1;
      b = eb + 1;
    }
  }

  FS& fs_;
  std::filesystem::path path_;
  verify_level level_;
  std::string subtree_;
  bool enabled_ = false;
  bool attached_ = false;
  bool keep_ = true;
  bool exists_ = false;
  bool parsed_ = false;
  bool trusted_ = false;
  handle dir_;
  std::string name_;
  std::uint64_t size_ = 0;
  std::uint64_t hash_ = fnv_basis;
  std::uint64_t budget_;
  state_defect defect_;
  manifest old_;
  manifest next_;
  std::atomic<std::size_t> gone_{0};
  std::vector<std::size_t> by_parent_;
  std::mutex mu_;
  std::atomic<bool> dropped_{false};
  bool drop_ok_ = true;
};

/// What a state file is tied to: the format and treesync's version, the two roots, the policies'
/// state keys (`policy_keys`, one line each), the switches that change what a run leaves in the
/// destination, the time model.  All of it data: the same run gives the same identity whatever
/// compiler built it.
inline std::string state_identity(const std::string& version, const std::filesystem::path& src,
                                  const std::filesystem::path& dst, std::string_view policy_keys, const options& o,
                                  const time_model& t) {
  std::string id = version;
  const auto add = [&id](std::string_view s) {
    id += '\n';
    id += s;
  };
  add(src.string());
  add(dst.string());
  id += policy_keys;  // each line starts with its '\n'
  std::string f(1, o.write == write_mode::atomic ? '1' : '0');
#define TREESYNC_FLAG_STATE(member, tag, traits, cli, help) \
  if ((traits) & switch_identity) f += o.member ? '1' : '0';
  TREESYNC_FLAGS(TREESYNC_FLAG_STATE)
#undef TREESYNC_FLAG_STATE
#define TREESYNC_VALUE_STATE(member, type, def, tag, traits, cli, help) \
  if (((traits) & switch_identity) && !(o.member == def)) f += " " #member "=" + std::to_string(o.member);
  TREESYNC_VALUES(TREESYNC_VALUE_STATE)
#undef TREESYNC_VALUE_STATE
  add(f);
  add(o.subtree);
  add(std::to_string(o.frontier_depth));
  add(std::to_string(t.resolution_ns) + (t.ctime ? " ctime" : " no-ctime"));
  // the copy-back switches (a line only when one is set: the default identity is unchanged)
  if (!o.perms || !o.chmod.empty() || o.existing || o.ignore_existing)
    add(std::string(o.perms ? "perms" : "no-perms") + " umask=" + std::to_string(o.umask & 0777) +
        (o.existing ? " existing" : "") + (o.ignore_existing ? " ignore-existing" : "") + " chmod=" + o.chmod.text());
  return id;
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_MANIFEST_HPP
