// manypy-server: the launcher. A small process (libc and libstdc++ only: no
// libtorch, CPython, gRPC or protobuf) that reads the flags it needs to bind
// the listening sockets, then runs the serving binary (serving_binary.h) as its
// supervised child (supervisor.h); with --no-supervisor, --help or --version
// it becomes the serving binary in place (exec: the same pid, for systemd,
// Kubernetes and whatever reads /proc/PID).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "server/log.h"
#include "server/supervisor/launch_options.h"
#include "server/supervisor/serving_binary.h"
#include "server/supervisor/supervisor.h"

namespace {

int ExecInPlace(const std::string& binary, char** argv) {
  execv(binary.c_str(), argv);
  fprintf(stderr, "manypy-server: cannot run %s: %s\n", binary.c_str(), strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace manypy;
  auto serving = ServingBinary();
  if (!serving.ok()) {
    fprintf(stderr, "manypy-server: %s\n", serving.status().message().c_str());
    return 1;
  }
  auto options = ReadLaunchOptions(argc, argv);
  // A bad flag: the serving binary, which reads every flag, says which and
  // exits with status 2 (before anything listens).
  if (!options.ok() || options->forward || !options->supervisor) return ExecInPlace(*serving, argv);
  SetLogLevel(options->log_level);
  SetLogFormat(options->log_format);
  return RunSupervisor(*serving, argv, *options);
}
