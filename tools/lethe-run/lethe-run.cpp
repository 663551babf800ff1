//===- lethe-run.cpp - Runs a compiled Lethe program on a GPU
//--------------===//
//
// Thin main: the runner lives in the runtime library (lib/Runtime/Runner.cpp).
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Tools.h"

int main(int argc, char **argv) { return lethe::rt::runnerMain(argc, argv); }
