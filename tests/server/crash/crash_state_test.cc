// The data the crash containment passes around, as functions: the crash line
// the signal handler writes and quarantine reads, the quarantine's verdicts
// over time, the handover from the supervisor to its child, and the flags the
// launcher reads (the serving process's own reading of them is checked too).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/crash/crash_record.h"
#include "server/lifecycle/quarantine.h"
#include "server/server_options.h"
#include "server/supervisor/launch_options.h"
#include "server/supervisor/supervised_child.h"
#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

std::string Crashes(const std::string& dir) {
  std::ifstream in(dir + "/crashes");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteCrashes(const std::string& dir, const std::string& text) {
  std::ofstream(dir + "/crashes") << text;
}

TEST(CrashRecordTest, ALineRoundTripsAndALongNameIsCutNotTheLine) {
  char line[512];
  size_t n = FormatCrashLine(line, sizeof(line), 1796444894, "SIGSEGV", "null_read", 3);
  EXPECT_EQ(std::string(line, n), "1796444894\tSIGSEGV\tnull_read\t3\n");
  auto parsed = ParseCrashLine(std::string(line, n - 1));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->time, 1796444894);
  EXPECT_EQ(parsed->signal, "SIGSEGV");
  EXPECT_EQ(parsed->model, "null_read");
  EXPECT_EQ(parsed->version, 3);

  const std::string long_name(200, 'm');
  char small[64];
  n = FormatCrashLine(small, sizeof(small), 1, "SIGABRT", long_name.c_str(), 12);
  ASSERT_LT(n, sizeof(small));
  const std::string cut(small, n);
  EXPECT_EQ(cut.back(), '\n');
  EXPECT_NE(cut.find("\t12\n"), std::string::npos) << cut;
}

TEST(CrashRecordTest, MalformedLinesAreRefused) {
  for (const char* bad : {"", "x\tSIGSEGV\tm\t1", "1\tSIGSEGV\tm", "1\tSIGSEGV\tm\t1\textra",
                          "1\tSIGSEGV\t\t1", "1\t\tm\t1", "1\tSIGSEGV\tm\tv"}) {
    EXPECT_FALSE(ParseCrashLine(bad)) << bad;
  }
  EXPECT_STREQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_STREQ(SignalName(SIGKILL), "SIGKILL");
}

TEST(QuarantineTest, TwoCrashesWithinTenMinutesQuarantineOneDoesNot) {
  testing::TempDir dir;
  WriteCrashes(dir.path(),
               "1000\tSIGSEGV\tcrashy\t1\n"
               "1500\tSIGABRT\tcrashy\t1\n"
               "1000\tSIGSEGV\tonce\t1\n"
               "garbage line\n"
               "100\tSIGSEGV\tslow\t1\n"
               "900\tSIGSEGV\tslow\t1\n");  // 800 s apart: not within 600
  auto q = Quarantine::Open({dir.path()}, 1600);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Status refused = (*q)->Admit("crashy", 1);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message().rfind("quarantined: crashed the server 2 times, last SIGABRT in "
                                    "version 1 at 1970-01-01T00:25:00Z",
                                    0),
            0u)
      << refused.message();
  EXPECT_TRUE((*q)->Admit("once", 1).ok());
  EXPECT_TRUE((*q)->Admit("slow", 1).ok());
  EXPECT_TRUE((*q)->Admit("crashy", 2).ok()) << "a newer version is not quarantined";
  EXPECT_EQ((*q)->Reasons().size(), 1u);
  // Gone: the garbage line, and the crashes of `slow`, older than the window
  // (before 1000 s) and quarantining nothing: a crash now could not pair with them.
  EXPECT_EQ(Crashes(dir.path()),
            "1000\tSIGSEGV\tcrashy\t1\n1000\tSIGSEGV\tonce\t1\n1500\tSIGABRT\tcrashy\t1\n");
  struct stat file {};
  ASSERT_EQ(stat((dir.path() + "/crashes").c_str(), &file), 0);
  EXPECT_EQ(file.st_mode & 0777, 0600u);
}

TEST(QuarantineTest, ItOutlivesTheWindowUntilLiftedOrCleared) {
  testing::TempDir dir;
  WriteCrashes(dir.path(), "1000\tSIGSEGV\tcrashy\t1\n1010\tSIGSEGV\tcrashy\t1\n");
  auto later = Quarantine::Open({dir.path()}, 100000);  // long after: still quarantined
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE((*later)->Admit("crashy", 1).ok());
  (*later)->Lift("crashy");
  EXPECT_TRUE((*later)->Admit("crashy", 1).ok());
  EXPECT_EQ(Crashes(dir.path()), "");
  auto reopened = Quarantine::Open({dir.path()}, 100000);
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->Admit("crashy", 1).ok()) << "the lift is kept in the file";

  WriteCrashes(dir.path(), "1000\tSIGSEGV\tcrashy\t1\n1010\tSIGSEGV\tcrashy\t1\n");
  Quarantine::Options clear{dir.path()};
  clear.clear = true;
  auto cleared = Quarantine::Open(clear, 1100);
  ASSERT_TRUE(cleared.ok());
  EXPECT_TRUE((*cleared)->Admit("crashy", 1).ok());
  EXPECT_EQ(Crashes(dir.path()), "");
}

TEST(QuarantineTest, AFolderThatCannotBeMadeIsAnError) {
  auto q = Quarantine::Open({"/proc/manypy-cannot-create-this/state"}, 0);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("--crash-state-dir /proc/manypy-cannot-create-this/state"),
            std::string::npos)
      << q.status().ToString();
}

TEST(SupervisedChildTest, TheHandoverRoundTrips) {
  SupervisedChild child;
  child.grpc_fds = {3, 4};
  child.http_fds = {5};
  child.ready_fd = 7;
  child.restarts = {{"SIGKILL", 1}, {"SIGSEGV", 2}};
  const std::string text = EncodeHandover(child);
  EXPECT_EQ(text, "grpc=3,4;http=5;ready=7;restarts=SIGKILL:1,SIGSEGV:2");
  auto back = DecodeHandover(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->grpc_fds, child.grpc_fds);
  EXPECT_EQ(back->http_fds, child.http_fds);
  EXPECT_TRUE(back->metrics_fds.empty());
  EXPECT_EQ(back->ready_fd, 7);
  EXPECT_EQ(back->restarts, child.restarts);
  EXPECT_FALSE(back->switching);
  EXPECT_EQ(back->reloads, 0);
  child.switching = true;  // a SIGHUP child, the third
  child.reloads = 3;
  EXPECT_EQ(EncodeHandover(child), "grpc=3,4;http=5;ready=7;switch=1;reloads=3;restarts=SIGKILL:1,SIGSEGV:2");
  back = DecodeHandover(EncodeHandover(child));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->switching);
  EXPECT_EQ(back->reloads, 3);
  for (const char* bad : {"grpc=x", "tcp=3", "ready", "restarts=SIGSEGV", "restarts=SIGSEGV:-1", "switch=2",
                          "reloads=-1", "reloads=x"}) {
    EXPECT_FALSE(DecodeHandover(bad)) << bad;
  }
}

// argv for the readers: "manypy-server" then `args`.
struct Argv {
  explicit Argv(std::vector<std::string> args) : words(std::move(args)) {
    words.insert(words.begin(), "manypy-server");
    for (auto& w : words) pointers.push_back(w.data());
  }
  int argc() const { return static_cast<int>(words.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> words;
  std::vector<char*> pointers;
};

TEST(LaunchOptionsTest, ReadsTheSocketFlagsAsTheServingProcessDoes) {
  const std::string config = ::testing::TempDir() + "/launch_options_test.conf";
  std::ofstream(config) << "# a comment\nhttp-port=9100\nno-metrics=true\ninterpreters=3\n";
  Argv args({"--grpc-address", "127.0.0.1", "--grpc-port=9101", "--config=" + config, "--no-supervisor",
             "--tracing", "--model-repository=/models", "--log-format=json", "--metrics-port", "9102"});
  auto launch = ReadLaunchOptions(args.argc(), args.argv());
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(launch->grpc_address, "127.0.0.1");
  EXPECT_EQ(launch->grpc_port, 9101);
  EXPECT_EQ(launch->http_port, 9100);
  EXPECT_TRUE(launch->http);
  EXPECT_FALSE(launch->metrics);
  EXPECT_EQ(launch->metrics_port, 9102);
  EXPECT_FALSE(launch->supervisor);
  EXPECT_FALSE(launch->forward);
  EXPECT_EQ(launch->log_format, "json");
  // The serving process reads the same words the same way (tracing aside,
  // which a build without OpenTelemetry refuses).
  Argv served({"--grpc-address", "127.0.0.1", "--grpc-port=9101", "--config=" + config, "--no-supervisor",
               "--model-repository=/models", "--log-format=json", "--metrics-port", "9102"});
  bool help = true;
  auto options = ParseServerOptions(served.argc(), served.argv(), &help);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_FALSE(help);
  EXPECT_EQ(options->grpc_address, launch->grpc_address);
  EXPECT_EQ(options->grpc_port, launch->grpc_port);
  EXPECT_EQ(options->http_port, launch->http_port);
  EXPECT_EQ(options->metrics, launch->metrics);
  EXPECT_EQ(options->metrics_port, launch->metrics_port);
  EXPECT_EQ(options->supervisor, launch->supervisor);
  EXPECT_EQ(options->interpreters, 3u);
}

TEST(LaunchOptionsTest, DefaultsForwardsAndErrors) {
  Argv none({});
  auto launch = ReadLaunchOptions(none.argc(), none.argv());
  ASSERT_TRUE(launch.ok());
  bool help = false;
  auto options = ParseServerOptions(none.argc(), none.argv(), &help);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(launch->grpc_address, options->grpc_address);
  EXPECT_EQ(launch->grpc_port, options->grpc_port);
  EXPECT_EQ(launch->http_port, options->http_port);
  EXPECT_EQ(launch->metrics_port, options->metrics_port);
  EXPECT_TRUE(launch->supervisor);
  for (const char* forwarded : {"--help", "-h", "--version"}) {
    Argv args({"--grpc-port=1", forwarded});
    auto read = ReadLaunchOptions(args.argc(), args.argv());
    ASSERT_TRUE(read.ok());
    EXPECT_TRUE(read->forward) << forwarded;
  }
  Argv bad_port({"--http-port=70000"});
  auto bad = ReadLaunchOptions(bad_port.argc(), bad_port.argv());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--http-port needs an integer in [0, 65535], got '70000'");
  Argv bare({"serve"});
  EXPECT_FALSE(ReadLaunchOptions(bare.argc(), bare.argv()).ok());
  Argv missing({"--grpc-port"});
  EXPECT_EQ(ReadLaunchOptions(missing.argc(), missing.argv()).status().message(), "--grpc-port needs a value");
  Argv no_file({"--config=/nonexistent/manypy.conf"});
  EXPECT_EQ(ReadLaunchOptions(no_file.argc(), no_file.argv()).status().code(), StatusCode::kNotFound);
}

TEST(LaunchOptionsTest, AConfigFileThatNamesItselfIsRefusedNotRecursed) {
  const std::string config = ::testing::TempDir() + "/launch_options_self.conf";
  std::ofstream(config) << "http-port=9100\nconfig=" << config << "\n";
  Argv args({"--config=" + config});
  auto read = ReadLaunchOptions(args.argc(), args.argv());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), "config file " + config +
                                         ": config files nested deeper than the limit of 8 "
                                         "(does one name itself?)");
  bool help = false;
  EXPECT_FALSE(ParseServerOptions(args.argc(), args.argv(), &help).ok());
}

}  // namespace
}  // namespace manypy
