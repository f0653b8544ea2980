//===- ProfileLauncher.cpp - `zenopt profile` runs zenopt-profile ---------===//
//
// The profiler links MPI, CUDA and NCCL; loading them (and their dependencies) took 4 ms of
// every zenopt start, planning included. So `zenopt profile ARGS` replaces this process by
// the zenopt-profile next to it, with the same arguments and environment (mpirun's ranks
// stay ranks), and it answers --help and the exit codes.
//
//===----------------------------------------------------------------------===//
#include "Command.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

namespace zen::cli {
namespace {

/// zenopt-profile in the folder of this executable.
std::string profilerPath() {
  char self[PATH_MAX];
  ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0)
    throw CommandError(ExitSoftware, std::string("profile: cannot find this executable "
                                                 "(/proc/self/exe): ") + std::strerror(errno));
  std::string path(self, static_cast<size_t>(length));
  return path.substr(0, path.find_last_of('/') + 1) + "zenopt-profile";
}

CommandRegistration registration(
    "profile", "Measure collectives under mpirun and write a calibrated cluster file",
    [](CLI::App &app) -> std::function<int()> {
      // Every argument after `profile`, --help included, is zenopt-profile's.
      app.prefix_command();
      app.set_help_flag();
      return [&app]() -> int {
        const std::string path = profilerPath();
        // Named zenopt, so that its usage line reads `zenopt profile`.
        std::vector<std::string> arguments{"zenopt", "profile"};
        for (const std::string &argument : app.remaining())
          arguments.push_back(argument);
        std::vector<char *> argv;
        for (std::string &argument : arguments)
          argv.push_back(argument.data());
        argv.push_back(nullptr);
        ::execv(path.c_str(), argv.data());
        throw CommandError(ExitSoftware, "profile: cannot run " + path + ": " +
                                             std::strerror(errno));
      };
    });

} // namespace
} // namespace zen::cli
