// treesync_version_check <expected-version>
//
// Fails (exit 1) when the build system's idea of the version (CMake's PROJECT_VERSION, Meson's
// meson.project_version()) differs from the header's TREESYNC_VERSION_STRING, or when the header's
// version macros disagree with each other. The header is the single source of truth; this test
// catches a build file that was bumped (or not) on its own.
#include <treesync/treesync.hpp>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <expected-version>\n", argv[0]);
    return 2;
  }
  int failures = 0;

  const std::string from_parts = std::to_string(TREESYNC_VERSION_MAJOR) + "." +
                                 std::to_string(TREESYNC_VERSION_MINOR) + "." +
                                 std::to_string(TREESYNC_VERSION_PATCH);
  if (from_parts != TREESYNC_VERSION_STRING) {
    std::fprintf(stderr, "TREESYNC_VERSION_MAJOR/MINOR/PATCH say %s, TREESYNC_VERSION_STRING says %s\n",
                 from_parts.c_str(), TREESYNC_VERSION_STRING);
    ++failures;
  }
  constexpr long expected_number =
      TREESYNC_VERSION_MAJOR * 10000L + TREESYNC_VERSION_MINOR * 100L + TREESYNC_VERSION_PATCH;
  if (TREESYNC_VERSION != expected_number) {
    std::fprintf(stderr, "TREESYNC_VERSION is %ld, expected %ld\n", static_cast<long>(TREESYNC_VERSION),
                 expected_number);
    ++failures;
  }
  if (std::strcmp(argv[1], TREESYNC_VERSION_STRING) != 0) {
    std::fprintf(stderr, "the build system says version %s, the header says %s\n", argv[1],
                 TREESYNC_VERSION_STRING);
    ++failures;
  }
  if (failures == 0) {
    std::printf("treesync %s: header and build system agree\n", TREESYNC_VERSION_STRING);
  }
  return failures == 0 ? 0 : 1;
}
