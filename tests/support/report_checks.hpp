// tests/support/report_checks.hpp - questions the tests ask of a treesync::report, shared so that
// each file does not carry its own copy:
//
//   has_path(r.errors, "a.txt")   whether a list of entry errors names a path;
//   has_error(r, "a.txt")         whether report.errors names it;
//   errors_of(r)                  report.errors, one "path operation: message" line each;
//   describe(r, ec)               the error code and the error / vanished lists, on one line;
//   count_diff(a, b)              the counters (and the number of errors) in which two reports
//                                 differ, one line each; empty when they agree.
#ifndef TREESYNC_TESTS_SUPPORT_REPORT_CHECKS_HPP
#define TREESYNC_TESTS_SUPPORT_REPORT_CHECKS_HPP

#include <treesync/treesync.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace treesync_test {

inline bool has_path(const std::vector<treesync::entry_error>& v, const std::string& path) {
  for (const auto& e : v)
    if (e.path == path) return true;
  return false;
}

inline bool has_error(const treesync::report& r, const std::string& path) { return has_path(r.errors, path); }

inline std::string errors_of(const treesync::report& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.path + " " + treesync::to_string(e.operation) + ": " + e.code.message() + "\n";
  return s;
}

inline std::string describe(const treesync::report& r, const std::error_code& ec) {
  std::ostringstream o;
  o << "ec=" << ec.message() << " errors=" << r.errors.size() << " vanished=" << r.vanished.size();
  for (const auto& e : r.errors)
    o << " [" << treesync::to_string(e.operation) << " " << treesync::escape(e.path) << ": " << e.code.message() << "]";
  return o.str();
}

/// Every counter of the two reports that differs ("created 3 != 4"), and the number of errors;
/// empty when all agree.
inline std::string count_diff(const treesync::report& a, const treesync::report& b) {
  std::string out;
  const auto field = [&out](const char* name, std::uint64_t x, std::uint64_t y) {
    if (x != y) out += std::string(name) + " " + std::to_string(x) + " != " + std::to_string(y) + "\n";
  };
  field("scanned", a.scanned, b.scanned);
  field("created", a.created, b.created);
  field("updated", a.updated, b.updated);
  field("meta_updated", a.meta_updated, b.meta_updated);
  field("deleted", a.deleted, b.deleted);
  field("excluded", a.excluded, b.excluded);
  field("skipped", a.skipped, b.skipped);
  field("cleaned", a.cleaned, b.cleaned);
  field("settled", a.settled, b.settled);
  field("bytes_copied", a.bytes_copied, b.bytes_copied);
  field("errors", a.errors.size(), b.errors.size());
  return out;
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_REPORT_CHECKS_HPP
