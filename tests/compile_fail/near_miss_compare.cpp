// Must not compile: a compare policy whose up_to_date is not const.
// The expected diagnostic is registered in tests/CMakeLists.txt.
#include <treesync/treesync.hpp>

struct by_size {
  bool up_to_date(const treesync::file_pair& f) { return f.src.size == f.dst.size; }
};

int main() { (void)treesync::sync("a", "b", by_size{}); }
