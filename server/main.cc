// manypy-serving: the serving process. Reads its flags, starts a Server
// (server.h) and serves until a stop signal (serve_until_signal.h: a drain,
// or a step aside for the supervisor's SIGHUP restart). Run by the launcher,
// manypy-server (supervisor/launcher_main.cc), as its child or in its place;
// a crash is reported (crash_handler.h).
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "server/crash/crash_handler.h"
#include "server/library_logging.h"
#include "server/log.h"
#include "server/serve_until_signal.h"
#include "server/server.h"
#include "server/server_options.h"
#include "server/startup_stop.h"
#include "server/supervisor/supervised_child.h"

int main(int argc, char** argv) {
  using namespace manypy;
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's deadlock
  // detection on: every lock gRPC takes then updates a process-wide lock graph
  // (measured: 3-4% of the server's CPU on small requests). Off, as in release builds.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool help = false, version = false;
  auto options = ParseServerOptions(argc, argv, &help, &version);
  if (!options.ok()) {
    fprintf(stderr, "manypy-server: %s\n", options.status().message().c_str());
    return 2;
  }
  if (help) {
    fputs(ServerUsage().c_str(), stdout);
    return 0;
  }
  if (version) {
    printf("manypy-server %s (libtorch %s, Python %s)\n", MANYPY_VERSION, MANYPY_TORCH_VERSION,
           MANYPY_PYTHON_VERSION);
    return 0;
  }
  SetLogLevel(options->log_level);
  SetLogFormat(options->log_format);
  // Set by the launcher when it supervises this process (not with --no-supervisor).
  std::optional<SupervisedChild> supervised = TakeSupervisedChild();
  InitLibraryLogging(argv[0]);
  InstallCrashHandler({options->log_format == "json", options->crash_state_dir});
  // For the line a model's os._exit leaves, which the model runtime's Python
  // writes: the interpreters copy the environment when the pool starts.
  setenv("MANYPY_LOG_FORMAT", options->log_format.c_str(), 1);
  SetAccessLogFraction(options->access_log_fraction);
  BlockStopSignals();  // before the server's threads start, so that they inherit it

  auto server = [&] {
    StartupStop stop_while_starting;  // SIGTERM before the ports accept: exit 0 at once
    return Server::Start(*options, supervised ? &*supervised : nullptr);
  }();
  if (!server.ok()) {
    if (server.status().code() == StatusCode::kInvalidArgument) {  // an option's file
      fprintf(stderr, "manypy-server: %s\n", server.status().message().c_str());
      return 2;
    }
    Log(LogLevel::kError, server.status().message());
    return 1;
  }
  return ServeUntilSignal(**server, std::chrono::seconds(options->grace_period_seconds));
}
