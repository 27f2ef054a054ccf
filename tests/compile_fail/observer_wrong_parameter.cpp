// Must not compile: an observer that takes a std::string instead of the action.
// The expected diagnostic is registered in tests/CMakeLists.txt.
#include <treesync/treesync.hpp>

#include <string>

struct printer {
  void operator()(const std::string& line) const { (void)line; }
};

int main() { (void)treesync::sync("a", "b", printer{}); }
