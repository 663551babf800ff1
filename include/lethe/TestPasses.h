//===- TestPasses.h - Lethe's test-only passes ------------------*- C++ -*-===//
//
// Passes that print analyses for FileCheck (`test-lethe-*`). Registered by
// lethe-opt only; not part of the public pass set.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_TESTPASSES_H
#define LETHE_TESTPASSES_H

namespace lethe::test {
void registerTestPasses();
} // namespace lethe::test

#endif // LETHE_TESTPASSES_H
