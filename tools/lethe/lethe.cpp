//===- lethe.cpp - The user-facing Lethe driver ---------------------------===//

#include "lethe/Driver/Driver.h"

int main(int argc, char **argv) { return lethe::runLetheDriver(argc, argv); }
