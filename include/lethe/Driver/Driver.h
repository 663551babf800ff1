//===- Driver.h - The `lethe` command-line driver ---------------*- C++ -*-===//
//
// `lethe <command> GRAPH [options]`: the user-facing tool. Each command's
// logic lives in lib/Driver; tools/lethe only calls runLetheDriver.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_DRIVER_DRIVER_H
#define LETHE_DRIVER_DRIVER_H

namespace lethe {

/// Parses the command line and runs the chosen command. Returns the process
/// exit code: 0 on success, 1 on bad input or a failed command.
int runLetheDriver(int argc, char **argv);

} // namespace lethe

#endif // LETHE_DRIVER_DRIVER_H
