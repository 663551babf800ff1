//===- lethe-calibrate.cpp - Measures a GPU, writes a device profile ------===//
//
// Thin main: the tool lives in the runtime library (lib/Runtime/
// Calibrate.cpp), the only code that links CUDA.
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Tools.h"

int main(int argc, char **argv) { return lethe::rt::calibrateMain(argc, argv); }
