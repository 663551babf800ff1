//===- TestPasses.cpp - Register Lethe's test-only passes -----------------===//

#include "lethe/TestPasses.h"

namespace lethe::test {
void registerTestLifetimesPass();
void registerTestSimulateProgramPass();

void registerTestPasses() {
  registerTestLifetimesPass();
  registerTestSimulateProgramPass();
}
} // namespace lethe::test
