// LauncherTest: manypy-server, the launcher, with the real serving binary. The
// parent links and maps none of libtorch, CPython, gRPC or protobuf and stays
// a few MiB; --help, --version and --no-supervisor reach the serving binary
// (in place: the same pid); SIGHUP switches to a new serving process while 5
// clients call a model (gRPC, HTTP, HTTP keep-alive): no connection refused,
// every request answered OK, and a new process that cannot start leaves the
// old one serving.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/process_tree.h"
#include "tests/test_util/resident_size.h"
#include "tests/test_util/scaled_clients.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::ChildOf;
using testing::ReadWholeFile;
using testing::Running;

// The launcher's own memory, anonymous (heap, stacks, data): it was 63 MiB
// when the parent was the serving binary itself (libtorch's, gRPC's and
// protobuf's static initialisers); libc and libstdc++ alone need well under this.
constexpr double kMaxParentRssAnonMiB = 4;
// Libraries the parent must neither link nor map.
const char* const kHeavyLibraries[] = {"libtorch", "libc10", "libpython", "libgrpc", "libprotobuf",
                                       "libgpr", "libabsl", "libtcmalloc"};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// stdout (and stderr) of `command` and its exit status.
std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  for (size_t n; pipe != nullptr && (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int raw = pipe != nullptr ? pclose(pipe) : -1;
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

// A field of /proc/PID/status in MiB ("RssAnon", "VmRSS"); -1 when absent.
double StatusMiB(pid_t pid, const std::string& field) {
  const int64_t bytes = testing::StatusBytes(pid, field);
  return bytes < 0 ? -1 : static_cast<double>(bytes) / (1024 * 1024);
}

class LauncherTest : public ServerTest {
 protected:
  void SetUp() override {
    dir_ = RepositoryOfTheTest("manypy_launcher", {"swap/scaled_v1.mpk"});
  }
  void TearDown() override {
    ServerTest::TearDown();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args) {
    args.push_back("--model-repository=" + (dir_ / "repository").string());
    args.push_back("--crash-state-dir=" + (dir_ / "state").string());
    StartServer(std::move(args));
  }
  std::string Log() { return ReadWholeFile(dir_ / "server.log"); }
  int HttpStatus(int port, const std::string& target, std::string* body = nullptr) {
    try {
      testing::HttpConnection connection(port);
      testing::HttpReply reply = connection.Send("GET", target);
      if (body != nullptr) *body = reply.body;
      return reply.status;
    } catch (const std::exception&) {
      return -1;
    }
  }
  // Waits up to `limit` for `done`; whether it came.
  template <typename Done>
  bool WaitFor(Done done, std::chrono::seconds limit = 90s) {
    for (const Clock::time_point until = Clock::now() + limit; Clock::now() < until;) {
      if (done()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return done();
  }

  fs::path dir_;
};

TEST_F(LauncherTest, TheParentLinksNoHeavyLibraryAndStaysSmall) {
  int status = 0;
  const std::string linked = RunCommand(std::string("ldd ") + MANYPY_SERVER_BINARY, &status);
  ASSERT_EQ(status, 0) << linked;
  for (const char* library : kHeavyLibraries) EXPECT_FALSE(Contains(linked, library)) << linked;

  Start({"--interpreters=1"});
  const pid_t parent = server_.pid(), child = ChildOf(parent);
  ASSERT_GT(child, 0) << Log();
  const std::string maps = ReadWholeFile("/proc/" + std::to_string(parent) + "/maps");
  for (const char* library : kHeavyLibraries) EXPECT_FALSE(Contains(maps, library)) << library;
  EXPECT_TRUE(Contains(ReadWholeFile("/proc/" + std::to_string(child) + "/maps"), "libtorch"));
  const double anon = StatusMiB(parent, "RssAnon"), rss = StatusMiB(parent, "VmRSS");
  printf("[ launcher ] parent (manypy-server): RssAnon %.2f MiB, VmRSS %.2f MiB; its serving child: "
         "RssAnon %.1f MiB, VmRSS %.1f MiB\n",
         anon, rss, StatusMiB(child, "RssAnon"), StatusMiB(child, "VmRSS"));
  EXPECT_GT(anon, 0);
  EXPECT_LT(anon, kMaxParentRssAnonMiB);
}

TEST_F(LauncherTest, NoSupervisorRunsTheServingBinaryInPlace) {
  Start({"--interpreters=1", "--no-supervisor"});
  EXPECT_EQ(ChildOf(server_.pid()), -1);
  const fs::path exe = fs::read_symlink("/proc/" + std::to_string(server_.pid()) + "/exe");
  EXPECT_EQ(exe.filename(), "manypy-serving") << exe;
  EXPECT_TRUE(Contains(ReadWholeFile("/proc/" + std::to_string(server_.pid()) + "/maps"), "libtorch"));
}

TEST_F(LauncherTest, HelpVersionAndBadFlagsAreTheServingBinarys) {
  int status = 0;
  std::string help = RunCommand(std::string(MANYPY_SERVER_BINARY) + " --help", &status);
  EXPECT_EQ(status, 0);
  for (const char* flag : {"--model-repository=DIR", "--no-supervisor", "--crash-state-dir", "--version",
                           "--trace-endpoint"}) {
    EXPECT_TRUE(Contains(help, flag)) << flag << "\n" << help;
  }
  std::string version = RunCommand(std::string(MANYPY_SERVER_BINARY) + " --version", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(version.rfind(std::string("manypy-server ") + MANYPY_VERSION + " (libtorch ", 0), 0u) << version;
  // A flag the launcher reads, and one only the serving binary knows: both
  // refused with status 2 and the flag named.
  std::string bad = RunCommand(std::string(MANYPY_SERVER_BINARY) + " --grpc-port=x", &status);
  EXPECT_EQ(status, 2);
  EXPECT_TRUE(Contains(bad, "--grpc-port needs an integer in [0, 65535], got 'x'")) << bad;
  bad = RunCommand(std::string(MANYPY_SERVER_BINARY) +
                " --grpc-address=127.0.0.1 --grpc-port=0 --http-port=0 --metrics-port=0 --bogus=1",
            &status);
  EXPECT_EQ(status, 2);
  EXPECT_TRUE(Contains(bad, "unknown flag --bogus")) << bad;
}

TEST_F(LauncherTest, SighupSwitchesWithoutARefusedConnection) {
  // Flags in a file: SIGHUP's child reads it again, so a bad one makes a child that cannot start.
  const fs::path config = dir_ / "server.conf";
  std::ofstream(config) << "model-control-mode=explicit\nload-model=scaled\n";
  // Connections get GOAWAY at 5 s old (30 by default): the old process's
  // clients move within that, then it exits.
  Start({"--config=" + config.string(), "--grace-period=20", "--grpc-max-connection-age=5"});
  const pid_t parent = server_.pid(), first = ChildOf(parent);
  ASSERT_GT(first, 0) << Log();
  testing::ScaledClients clients(server_.address(), server_.http_port());
  // A fifth client keeps its HTTP connection while the server lets it (a
  // process stepping aside ends it after a reply; the next one is the new's).
  std::atomic<bool> stop_keep_alive{false};
  std::thread keep_alive([&] {
    const std::string body = R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1],"data":[2]}]})";
    while (!stop_keep_alive) {
      try {
        testing::HttpConnection connection(server_.http_port());
        for (bool open = true; open && !stop_keep_alive;) {
          testing::HttpReply reply = connection.Send("POST", "/v2/models/scaled/infer", body);
          clients.tally.Count(reply.status == 200 ? "keep-alive ok" : "keep-alive failed: " + std::to_string(reply.status));
          open = reply.status == 200 && reply.keep_alive;
        }
      } catch (const std::exception& e) {
        clients.tally.Count(std::string("keep-alive refused: ") + e.what());
      }
    }
  });
  std::this_thread::sleep_for(300ms);

  // A new child that cannot start: the old one keeps serving, nothing switched.
  std::ofstream(config) << "model-control-mode=explicit\nload-model=scaled\nbogus=1\n";
  kill(parent, SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Contains(Log(), "before it was ready; " + std::to_string(first) + " keeps serving"); }))
      << Log();
  EXPECT_TRUE(Contains(Log(), "unknown flag --bogus")) << Log();
  EXPECT_TRUE(Running(first));

  // The switch: the new child serves once ready, the old one drains and exits.
  std::ofstream(config) << "model-control-mode=explicit\nload-model=scaled\n";
  const Clock::time_point hup = Clock::now();
  kill(parent, SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Contains(Log(), "stops accepting and drains"); })) << Log();
  const double switched = std::chrono::duration<double>(Clock::now() - hup).count();
  ASSERT_TRUE(WaitFor([&] { return !Running(first); }, 30s)) << "the old serving process did not exit\n" << Log();
  const double drained = std::chrono::duration<double>(Clock::now() - hup).count();
  std::this_thread::sleep_for(500ms);  // the clients are served by the new one
  clients.Stop();
  stop_keep_alive = true;
  keep_alive.join();
  const std::string counts = clients.tally.ToString();
  printf("[ launcher ] SIGHUP: switched after %.2f s, old process gone after %.2f s; answers: %s"
         "(2-core machine shared by 4 engineers)\n", switched, drained, counts.c_str());
  EXPECT_FALSE(Contains(counts, "refused")) << counts;
  EXPECT_FALSE(Contains(counts, "unavailable")) << counts;
  EXPECT_FALSE(Contains(counts, "closed")) << counts;
  EXPECT_FALSE(Contains(counts, "other")) << counts;
  EXPECT_GT(clients.tally.Of("grpc ok"), 0) << counts;
  EXPECT_GT(clients.tally.Of("http ok"), 0) << counts;
  EXPECT_GT(clients.tally.Of("keep-alive ok"), 0) << counts;
  EXPECT_FALSE(Contains(counts, "failed")) << counts;

  const pid_t second = ChildOf(parent);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);
  EXPECT_TRUE(Contains(Log(), "replaced serving process " + std::to_string(first) + " exited with status 0"))
      << Log();
  std::string metrics;
  EXPECT_EQ(HttpStatus(server_.metrics_port(), "/metrics", &metrics), 200);
  EXPECT_TRUE(Contains(metrics, "manypy_build_info")) << metrics;
  // One switch (the refused child never served), no crash.
  EXPECT_TRUE(Contains(metrics, "\nmanypy_server_reloads_total 1\n")) << metrics;
  EXPECT_FALSE(Contains(metrics, "manypy_server_restarts_total{")) << metrics;
  EXPECT_EQ(HttpStatus(server_.http_port(), "/v2/health/ready"), 200);
  ModelInferResponse out;
  EXPECT_TRUE(Infer(FloatRequest("scaled", {1.f}), &out).ok());
}

TEST_F(LauncherTest, SigtermAtAnyMomentOfTheStartExitsZeroPromptlyAndLeavesNoProcess) {
  // Delays chosen to land (after a whole start, -1, which measures it) once it
  // serves, in the launcher, the serving process's first steps, its
  // interpreters starting and its model loading (the full start is about
  // 2-4 s here). Stopping a start never takes longer than finishing it would:
  // the bound is this machine's own time to ready, plus a second.
  int stopped_starts = 0;
  double own_start = 0;
  for (int delay_ms : {-1, 0, 150, 600, 1500}) {
    SCOPED_TRACE("SIGTERM after " + std::to_string(delay_ms) + " ms");
    testing::ServerProcess server;
    const fs::path log = dir_ / ("sigterm_" + std::to_string(delay_ms) + ".log");
    server.set_stderr_path(log.string());
    const std::vector<std::string> args = {"--interpreters=1", "--no-metrics",
                                           "--model-repository=" + (dir_ / "repository").string(),
                                           "--crash-state-dir=" + (dir_ / "state").string()};
    pid_t child = -1;
    if (delay_ms < 0) {
      const Clock::time_point spawned = Clock::now();
      ASSERT_TRUE(server.Start(MANYPY_SERVER_BINARY, args));
      own_start = std::chrono::duration<double>(Clock::now() - spawned).count();
      child = ChildOf(server.pid());
    } else {
      ASSERT_TRUE(server.Spawn(MANYPY_SERVER_BINARY, args));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      child = ChildOf(server.pid());
    }
    const Clock::time_point sent = Clock::now();
    kill(server.pid(), SIGTERM);
    const int status = server.WaitForExit(20);
    const double took = std::chrono::duration<double>(Clock::now() - sent).count();
    printf("[ sigterm  ] after %d ms: exit status %d %.2f s after the signal (own start %.2f s)\n",
           delay_ms, status, took, own_start);
    // 0, as a drain that lost nothing; 143 (killed by SIGTERM) only when the
    // signal reaches the launcher before it handles signals, with no child yet.
    if (status == 128 + SIGTERM) {
      EXPECT_LE(child, 0) << "a launcher with a serving process died of SIGTERM";
    } else {
      EXPECT_EQ(status, 0) << ReadWholeFile(log);
    }
    EXPECT_LT(took, own_start + 1.0) << ReadWholeFile(log);
    if (child > 0) {
      EXPECT_FALSE(Running(child)) << "serving process " << child << " outlived its launcher";
    }
    // Within the start, it stops the start; once serving, it drains.
    const std::string said = ReadWholeFile(log);
    if (delay_ms < 0) {
      EXPECT_TRUE(Contains(said, "SIGTERM: passed on to the serving process")) << said;
      EXPECT_TRUE(Contains(said, "stopped")) << said;
    } else if (child > 0) {
      const bool in_start = Contains(said, "during start-up: stopping before serving anything");
      stopped_starts += in_start;
      EXPECT_TRUE(in_start || Contains(said, "stopped")) << said;
    }
  }
  EXPECT_GE(stopped_starts, 1) << "no SIGTERM landed in a start";
}

}  // namespace
}  // namespace manypy
