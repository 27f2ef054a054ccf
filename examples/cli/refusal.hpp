// examples/cli/refusal.hpp - a refused run in words and in kind: what the treesync CLI, the MPI
// tool and the Python package (python/src/_treesync.cpp) say when sync() refuses a run, each
// naming its options its own way (--max-delete=5, max_delete=5), and how it ends (the CLI's exit
// status, Python's exception class).  Part of the front ends' kit (examples/cli).
#ifndef TREESYNC_CLI_REFUSAL_HPP
#define TREESYNC_CLI_REFUSAL_HPP

#include "text.hpp"

#include <treesync/treesync.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// How a run that failed as a whole ends, for every front end: the CLI's (and the MPI tool's) exit
/// status, rsync's where rsync has one (a missing source 23, over --max-delete 25, a missing
/// --temp-dir 1, as a usage error; any other 2), and whether the library refused it by a rule of
/// its own (a code of treesync's category: Python raises treesync.Refused) or the system failed it
/// (an errno: treesync.Error, as the builtin OSError class of the errno).
struct refusal_kind {
  int exit_code;
  bool by_rule;
};
inline refusal_kind classify_refusal(const std::error_code& ec) {
  const bool by_rule = ec.category() == treesync::error_category();
  if (ec == treesync::errc::source_missing) return {23, by_rule};
  if (ec == treesync::errc::max_delete_exceeded) return {25, by_rule};
  if (ec == treesync::errc::temp_dir_missing) return {1, by_rule};
  return {2, by_rule};
}

/// A refusal in a front end's words: the message and the path at fault ("" when the refusal is
/// about both).
struct refusal_text {
  std::string message;
  std::string path;
};

/// How a front end writes an option: the command line's --max-delete=5, Python's max_delete=5.
enum class spelling { cli, python };

/// The option `key` (the library's member or Python's keyword: "max_delete") with its value
/// (none: a flag given, Python's =True), as `how` writes it.
inline std::string option_spelled(spelling how, std::string key, const std::string* value = nullptr) {
  if (how == spelling::python) return key + "=" + (value ? *value : std::string("True"));
  for (char& c : key) c = c == '_' ? '-' : c;
  return "--" + key + (value ? "=" + *value : std::string());
}

/// What a refusal's words need from the run: its roots as named, and the options they mention.
struct refusal_facts {
  std::string src, dst;
  std::optional<std::size_t> max_delete;  // as given
  std::size_t would_delete = 0;           // what the run would delete (report::would_delete)
  std::optional<std::string> state;       // the state file, as given
  std::optional<std::string> temp_dir;    // the temp directory, as given
};

/// The words of the refusal `ec` of a run with `facts`, its options written as `how` writes them.
inline refusal_text describe_refusal(const refusal_facts& facts, const std::error_code& ec, spelling how) {
  const std::string& src = facts.src;
  const std::string& dst = facts.dst;
  struct stat st;
  if (ec == treesync::errc::max_delete_exceeded) {
    const std::string cap = std::to_string(facts.max_delete ? *facts.max_delete : 0);
    return {"would delete " + std::to_string(facts.would_delete) + " entries, " +
                option_spelled(how, "max_delete", &cap) + " (none of them was made)",
            dst};
  }
  if (ec == treesync::errc::empty_source)
    return {"source " + display(src) + " is empty and destination " + display(dst) + " is not (" +
                option_spelled(how, "allow_empty_source") + " to proceed)",
            src};
  if (ec == treesync::errc::same_directory)
    return {"source " + display(src) + " and destination " + display(dst) + " are the same directory", dst};
  if (ec == treesync::errc::nested_directory)
    return {"source " + display(src) + " and destination " + display(dst) + " are nested in each other", dst};
  if (ec == treesync::errc::source_missing) return {"source " + display(src) + ": No such file or directory", src};
  if ((ec == treesync::errc::state_not_regular || ec == treesync::errc::state_dir_missing) && facts.state) {
    const std::string shown = display(*facts.state);
    return {option_spelled(how, "state", &shown) + ": " + ec.message() + " (nothing was touched)", *facts.state};
  }
  if ((ec == treesync::errc::temp_dir_missing || ec == treesync::errc::unsafe_temp_dir) && facts.temp_dir) {
    const std::string shown = display(*facts.temp_dir);
    return {option_spelled(how, "temp_dir", &shown) + ": " + ec.message() + " (nothing was touched)", *facts.temp_dir};
  }
  if (ec == treesync::errc::destination_parent_missing)
    return {"destination " + display(dst) + ": its parent directory does not exist", dst};
  if (ec == treesync::errc::destination_dangling_symlink)
    return {"destination " + display(dst) + " is a dangling symbolic link (not followed, not replaced)", dst};
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    if (::stat(src.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {"source " + display(src) + ": " + ec.message(), src};
    if (::stat(dst.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      return {"destination " + display(dst) + ": " + ec.message(), dst};
    if (ec == std::errc::no_such_file_or_directory)
      return {"destination " + display(dst) + ": its parent directory does not exist", dst};
  }
  // What is left failed in opening or making a root.  A destination that does not exist (it
  // could not be made: read-only filesystem, no permission, no space) is at fault, and so is one
  // that exists when the source can be read; a source that cannot be read is.
  if (::lstat(dst.c_str(), &st) != 0) return {"destination " + display(dst) + ": " + ec.message(), dst};
  if (::access(src.c_str(), R_OK | X_OK) != 0) return {"source " + display(src) + ": " + ec.message(), src};
  if (::access(dst.c_str(), W_OK | X_OK) != 0) return {"destination " + display(dst) + ": " + ec.message(), dst};
  return {display(src) + " -> " + display(dst) + ": " + ec.message(), ""};
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_REFUSAL_HPP
