//===- lethe-rt-bench.cpp - Measures the runtime on a GPU
//------------------===//
//
// Thin main: the benchmark lives in the runtime library
// (lib/Runtime/Bench.cpp).
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Tools.h"

int main(int argc, char **argv) { return lethe::rt::benchMain(argc, argv); }
