// Must not compile: an argument that is not a policy of any category.
// The expected diagnostic is registered in tests/CMakeLists.txt.
#include <treesync/treesync.hpp>

int main() { treesync::sync("a", "b", 42); }
