//===- TestPasses.cpp - Register Lethe's test-only passes -----------------===//

#include "lethe/TestPasses.h"

namespace lethe::test {
void registerTestLayersPass();
void registerTestLifetimesPass();
void registerTestSimulateProgramPass();

void registerTestPasses() {
  registerTestLayersPass();
  registerTestLifetimesPass();
  registerTestSimulateProgramPass();
}
} // namespace lethe::test
