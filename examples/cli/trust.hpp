// examples/cli/trust.hpp - rsync 3.5's untrusted-symlink rule for the paths the operator names:
// the DST operand, the --exclude-from / --include-from files, --state=FILE and --backup-dir=DIR.
// A symbolic link at any component of one of them is followed only when it is owned by root or by
// the user running the tool (treesync::open_trusted); one owned by another user is refused before
// anything is written, with rsync's exit status: 3 for DST (rsync's "errors selecting input/output
// files, dirs": its change_dir into DST fails), 11 for --backup-dir and a file read or written
// (rsync's "error in file IO": failed to open exclude file; rsync 3.5 stops with 11 at the first
// backup through such a link, treesync refuses before the run).  --insecure-links (rsync's
// opt-out) follows every link as before.  Shared by examples/treesync.cpp and treesync_mpi.cpp.
#ifndef TREESYNC_CLI_TRUST_HPP
#define TREESYNC_CLI_TRUST_HPP

#include "options.hpp"
#include "outcome.hpp"
#include "output.hpp"
#include "run.hpp"
#include "text.hpp"

#include <treesync/treesync.hpp>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// A path refused by the rule: the exit status (3 or 11), the message (after "treesync: refused: ")
/// and the path at fault, as given on the command line.
struct trust_refusal {
  int exit_code = 0;
  std::string message;
  std::string path;
};

/// Why the link `r` met is not followed.
inline std::string untrusted_link_reason(const treesync::trusted_open_result& r) {
  return "symbolic link " + display(r.untrusted) + " is owned by uid " + std::to_string(r.owner) +
         ", neither root nor the caller: not followed (rsync 3.5's rule; --insecure-links follows it; nothing was "
         "written)";
}

/// Reads an --exclude-from / --include-from file for make_filter(): through open_trusted() (no
/// symlink of another user followed, at any component), or as read_file() does under
/// --insecure-links and for "-" (stdin).  A refused link sets `*refused` (exit 11, rsync's
/// "failed to open exclude file NAME") and fails with ELOOP.
struct rule_file_reader {
  const options* opt;
  std::shared_ptr<std::optional<trust_refusal>> refused = std::make_shared<std::optional<trust_refusal>>();

  bool operator()(const std::string& name, std::string& text, std::error_code& ec) const {
    if (opt->insecure_links || name == "-") return read_file(name, text, ec);
    const treesync::trusted_open_result r = treesync::open_trusted(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (r.refused()) {
      bool include = false;
      for (const auto& f : opt->filters)
        if (f.value == name && (f.kind == filter_arg::include_from || f.kind == filter_arg::exclude_from)) {
          include = f.kind == filter_arg::include_from;
          break;
        }
      *refused = trust_refusal{11,
                               std::string("failed to open ") + (include ? "include" : "exclude") + " file " +
                                   display(name) + ": " + untrusted_link_reason(r),
                               name};
    }
    if (r.fd < 0) {
      ec.assign(r.error, std::generic_category());
      return false;
    }
    std::FILE* f = ::fdopen(r.fd, "rb");
    if (!f) {
      ec.assign(errno, std::generic_category());
      ::close(r.fd);
      return false;
    }
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    const bool failed = std::ferror(f) != 0;
    if (failed) ec.assign(errno ? errno : EIO, std::generic_category());
    std::fclose(f);
    return !failed;
  }
};

/// `p` without trailing separators ("/" stays), as the library names the paths it is given.
inline std::string strip_separators(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

/// Walks DST (and NAME below it, for SRC without a trailing slash) under the rule and keeps what
/// the walk reached open for the run (`dirs`: pin_dst, dst_rule_files, prepare_destination): DST
/// (options::dst_root) when it exists, else the directory it is to be made in.  A refused link
/// gives the refusal (exit 3) and no `dirs`; so does a DST the walk cannot reach (a component
/// missing above its last one, not a directory, ...): the library then says why by path.
inline std::optional<trust_refusal> walk_destination(const options& o, std::shared_ptr<dst_directories>& dirs) {
  dirs.reset();
  const auto refusal = [&o](const treesync::trusted_open_result& r) {
    return trust_refusal{3, "destination " + display(o.operands[1]) + ": " + untrusted_link_reason(r), o.operands[1]};
  };
  auto d = std::make_shared<dst_directories>();
  d->path = o.dst_root;
  d->name = o.name;
  // a walk that could not reach DST (a component missing above its last one, not a directory, ...):
  // the run is refused for what the walk met, whatever the path names when it starts
  // (pin_unreachable); a link to nothing at DST's name is left to the library (by path: refused)
  const auto unreachable = [&](const treesync::trusted_open_result& r) {
    if (r.dangling) return std::optional<trust_refusal>{};
    d->unreachable = r.error ? r.error : ENOENT;
    dirs = std::move(d);
    return std::optional<trust_refusal>{};
  };
  if (o.name.empty()) {
    const treesync::trusted_open_result r = treesync::open_trusted_dir(o.dst_root);
    if (r.refused()) return refusal(r);
    if (r.fd >= 0)
      d->top = r.fd;
    else if (r.missing_leaf())
      d->parent = r.parent;
    else
      return unreachable(r);
    dirs = std::move(d);
    return std::nullopt;
  }
  // SRC without a slash: DST, then NAME from DST's descriptor
  d->operand = o.operands[1];
  const treesync::trusted_open_result r = treesync::open_trusted_dir(o.operands[1]);
  if (r.refused()) return refusal(r);
  if (r.missing_leaf()) {  // DST is made by prepare_destination, in the directory walked
    d->made_in = r.parent;
    d->made_leaf = r.leaf;
    dirs = std::move(d);
    return std::nullopt;
  }
  if (r.fd < 0) return unreachable(r);
  d->parent = r.fd;
  const treesync::trusted_open_result n = treesync::open_trusted_dir_at(r.fd, o.operands[1], o.name);
  if (n.parent >= 0) ::close(n.parent);  // (DST itself: d->parent)
  if (n.refused()) return refusal(n);
  if (n.fd >= 0)
    d->top = n.fd;
  else if (!n.missing_leaf())
    return unreachable(n);
  dirs = std::move(d);
  return std::nullopt;
}

/// The first of DST (DST/NAME included), --backup-dir, --temp-dir (relative: to the directory mirrored) and
/// --state whose walk meets a symbolic link of another user than root or the caller, or nothing
/// (also under --insecure-links).  A path missing from some component on is walked as far as it
/// exists.  `dirs`: what DST's walk reached, for the run (walk_destination; none under
/// --insecure-links).
inline std::optional<trust_refusal> untrusted_operator_path(const options& o,
                                                            std::shared_ptr<dst_directories>* dirs = nullptr) {
  if (dirs) dirs->reset();
  if (o.insecure_links) return std::nullopt;
  treesync::trusted_open_result r;
  std::shared_ptr<dst_directories> walked;
  if (auto t = walk_destination(o, walked)) return t;
  if (dirs) *dirs = std::move(walked);
  if (o.backup_dir) {
    const std::string& b = *o.backup_dir;
    const std::string path = b[0] == '/' ? b : join_name(o.dst_root, b);
    if (treesync::meets_untrusted_symlink(path, r))
      return trust_refusal{11, "--backup-dir=" + display(b) + ": " + untrusted_link_reason(r), b};
  }
  if (!o.lib.temp_dir.empty()) {
    const std::string t = o.lib.temp_dir.string();
    const std::string path = t[0] == '/' ? t : join_name(o.dst_root, t);
    if (treesync::meets_untrusted_symlink(path, r))
      return trust_refusal{11, "--temp-dir=" + display(t) + ": " + untrusted_link_reason(r), t};
  }
  if (o.state && treesync::meets_untrusted_symlink(*o.state, r))
    return trust_refusal{11, "--state=" + display(*o.state) + ": " + untrusted_link_reason(r), *o.state};
  if (o.state) {  // the state file's directory as walked: the run reads and replaces the file there
    const std::filesystem::path p = strip_separators(*o.state);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    if (strip_separators(dir) != strip_separators(o.dst_root)) {  // (in DST's root: through DST's pin)
      const treesync::trusted_open_result d = treesync::open_trusted_dir(dir);
      if (d.parent >= 0) ::close(d.parent);
      if (d.refused())
        return trust_refusal{11, "--state=" + display(*o.state) + ": " + untrusted_link_reason(d), *o.state};
      if (dirs) {
        if (!*dirs) {
          *dirs = std::make_shared<dst_directories>();
          (*dirs)->path = o.dst_root;
          (*dirs)->name = o.name;
        }
        // not reached (missing, not a directory, changed during the walk): the run fails on it
        // with the walk's errno, never opening by a path that may lead through a link put there since
        (*dirs)->state_dir = d.fd;
        // (below DST's root the run reaches it from DST's pin, never following a link)
        const std::string root = strip_separators(o.dst_root);
        const bool below_dst = dir.compare(0, root.size() + 1, root + "/") == 0;
        (*dirs)->state_dir_unreachable = d.fd >= 0 || below_dst ? 0 : (d.error ? d.error : ENOENT);
        (*dirs)->state_dir_path = dir;
      } else if (d.fd >= 0) {
        ::close(d.fd);
      }
    }
  }
  return std::nullopt;
}

/// Prints the refusal `t` as every refusal is (stderr, and the --json report with status
/// "refused", the refusal's code ELOOP) and returns its exit status.
inline int print_untrusted_refusal(const options& opt, const trust_refusal& t, const report_extras& extras = {}) {
  outcome out;
  out.exit_code = t.exit_code;
  out.status = "refused";
  out.refusal = std::make_error_code(std::errc::too_many_symbolic_link_levels);
  const std::vector<std::string> no_actions;
  return print_report(opt, treesync::report{}, out, refusal_text{t.message, t.path},
                      opt.itemize || opt.verbose ? &no_actions : nullptr, extras);
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_TRUST_HPP
