// ConnectionFaultTest: faults an operator meets at the sockets, against the
// real manypy-server: descriptors running out (a low open-file limit, model
// code that leaks descriptors), floods of idle connections, slow senders and
// bodies whose Content-Length lies. Each checks the server's CPU, log and
// descriptors while the fault lasts and that it serves normally after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/metrics_scrape.h"
#include "tests/test_util/process_tree.h"
#include "tests/test_util/raw_connection.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const char* kTwoIoJson = R"({"inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}]})";

/// Of `fds`, how many the server has closed within `wait` (end of stream or a
/// reset; bytes it sent, as gRPC's settings frame, do not count).
size_t ClosedByServer(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  size_t closed = 0;
  const auto deadline = Clock::now() + wait;
  for (int fd : fds) {
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) break;
      char buf[256];
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) continue;  // data: not a close; look again
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) ++closed;
      break;
    }
  }
  return closed;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

/// CPU time (user + system, all threads) of `pid` in seconds.
double CpuSeconds(pid_t pid) {
  std::string stat = testing::ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// The descriptors `pid` has open.
size_t OpenFds(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

/// Waits (up to 10 s) until `pid` has at most `fds` descriptors open; what it has then.
size_t WaitForFdsAtMost(pid_t pid, size_t fds) {
  size_t now = OpenFds(pid);
  for (auto deadline = Clock::now() + 10s; now > fds && Clock::now() < deadline; now = OpenFds(pid)) {
    std::this_thread::sleep_for(50ms);
  }
  return now;
}

/// The descriptors `pid` has open once the count holds still for 200 ms (up to 3 s).
size_t SettledFds(pid_t pid) {
  size_t now = OpenFds(pid);
  for (auto deadline = Clock::now() + 3s; Clock::now() < deadline;) {
    std::this_thread::sleep_for(200ms);
    const size_t next = OpenFds(pid);
    if (next == now) break;
    now = next;
  }
  return now;
}

/// This process's own open-file limit raised to its hard limit (the floods
/// need descriptors of their own); the limit then.
rlim_t RaiseOwnOpenFileLimit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

class ConnectionFaultTest : public ServerTest {
 protected:
  void SetUp() override {
    dir_ = RepositoryOfTheTest("manypy_connection_faults",
                               {"two_io.mpk", "slow.mpk", "faults/holds_files.mpk"});
  }
  void TearDown() override {
    ServerTest::TearDown();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args) {
    args.push_back("--model-repository=" + (dir_ / "repository").string());
    StartServer(std::move(args));
  }
  double Metric(const std::string& name, const std::string& model, const std::string& label = "") {
    return testing::MetricValue(server_.metrics_port(), name, model, label);
  }
  /// Waits (up to 10 s) until `name` for `model` reads `value`; whether it did.
  bool WaitForMetric(const std::string& name, const std::string& model, double value) {
    for (auto deadline = Clock::now() + 10s; Clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
      if (Metric(name, model) == value) return true;
    }
    return false;
  }
  std::string Log() const { return testing::ReadWholeFile(dir_ / "server.log"); }
  size_t LogSize() const { return Log().size(); }

  /// A request to holds_files: it holds `n` descriptors (0: closes them); how many it holds.
  int HoldFiles(float n) {
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest("holds_files", {n}), &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? static_cast<int>(FromRaw<float>(out.raw_output_contents(0))[0]) : -1;
  }
  bool ServesHttp() {
    testing::HttpConnection c(server_.http_port());
    return c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson).status == 200;
  }
  bool ServesGrpc() {
    ModelInferResponse out;
    return Infer(TwoIoRequest(true), &out, 10000).ok();
  }

  fs::path dir_;
};

TEST_F(ConnectionFaultTest, DescriptorsRunningOutNeitherSpinNorFloodTheLogAndComeBack) {
  const rlim_t own = RaiseOwnOpenFileLimit();
  // A soft limit of 64 under a hard one of 256: the server raises the first to the second.
  server_.set_open_file_limit(64, 256);
  Start({"--interpreters=1", "--no-metrics"});
  const pid_t serving = server_.serving_pid();
  const std::string limits = testing::ReadWholeFile("/proc/" + std::to_string(serving) + "/limits");
  EXPECT_TRUE(std::regex_search(limits, std::regex("Max open files +256 +256 "))) << limits;
  // Both connection limits lowered under the 256 descriptors, in one line.
  std::smatch m;
  const std::string log = Log();
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex("descriptors: open-file limit 256 \\(raised from 64\\), hard limit 256; (\\d+) open, "
                 "64 kept for the server's own files; connection limits: HTTP (\\d+) "
                 "\\(--http-max-connections=1024, lowered to fit\\), gRPC (\\d+) "
                 "\\(--grpc-max-connections=1024, lowered to fit\\)")))
      << log;
  printf("[ fds      ] %s\n", m[0].str().c_str());
  const int open_at_start = std::stoi(m[1]), http_limit = std::stoi(m[2]), grpc_limit = std::stoi(m[3]);
  EXPECT_LE(open_at_start + 64 + http_limit + grpc_limit, 256);
  ASSERT_TRUE(ServesGrpc());  // the test's own gRPC connection: one of grpc_limit
  ASSERT_TRUE(ServesHttp());
  const size_t baseline = SettledFds(serving);

  // 1. Idle connections by the thousand (as many as this process can open):
  // each frontend holds its limit and closes the rest at once.
  const int flood = static_cast<int>(std::min<rlim_t>(1500, (own - 100) / 2));
  std::vector<int> http_idle, grpc_idle;
  const size_t log_before = LogSize();
  for (int i = 0; i < flood; ++i) {
    if (int fd = testing::ConnectRaw(server_.http_port()); fd >= 0) http_idle.push_back(fd);
    if (int fd = testing::ConnectRaw(std::stoi(server_.address().substr(10))); fd >= 0) grpc_idle.push_back(fd);
  }
  const double cpu_before = CpuSeconds(serving);
  std::this_thread::sleep_for(2s);
  const double flood_cpu = CpuSeconds(serving) - cpu_before;
  const size_t http_closed = ClosedByServer(http_idle, 500ms);
  const size_t grpc_closed = ClosedByServer(grpc_idle, 500ms);
  const size_t fds_in_flood = OpenFds(serving);
  printf("[ fds      ] %d + %d idle connections: the server closed %zu HTTP (limit %d) and %zu gRPC "
         "(limit %d); %zu descriptors open of 256; CPU %.2f s over 2 s; log +%zu bytes\n",
         flood, flood, http_closed, http_limit, grpc_closed, grpc_limit, fds_in_flood, flood_cpu,
         LogSize() - log_before);
  EXPECT_EQ(http_idle.size() - http_closed, static_cast<size_t>(http_limit));
  EXPECT_EQ(grpc_idle.size() - grpc_closed, static_cast<size_t>(grpc_limit - 1));
  EXPECT_LE(fds_in_flood, 256u);
  EXPECT_LT(flood_cpu, 0.2);
  EXPECT_LT(LogSize() - log_before, 2000u);
  EXPECT_TRUE(ServesGrpc());  // a connection held before the flood serves on
  CloseAll(&http_idle);
  CloseAll(&grpc_idle);
  EXPECT_LE(WaitForFdsAtMost(serving, baseline), baseline);
  EXPECT_TRUE(ServesHttp());

  // 2. Model code takes every descriptor left: accept() fails with EMFILE. The
  // HTTP accept loop backs off (one line), clients wait in the kernel's queue.
  const int held = HoldFiles(100000);
  EXPECT_GT(held, 0);
  EXPECT_GE(OpenFds(serving), 255u);
  const size_t log_before_emfile = LogSize();
  std::vector<std::unique_ptr<testing::HttpConnection>> waiting;
  for (int i = 0; i < 20; ++i) {
    waiting.push_back(std::make_unique<testing::HttpConnection>(server_.http_port()));
    waiting.back()->WriteRaw(std::string("POST /v2/models/two_io/infer HTTP/1.1\r\nHost: x\r\n"
                                         "Connection: close\r\nContent-Length: ") +
                             std::to_string(strlen(kTwoIoJson)) + "\r\n\r\n" + kTwoIoJson);
  }
  const double cpu_emfile_before = CpuSeconds(serving);
  std::this_thread::sleep_for(2s);
  const double emfile_cpu = CpuSeconds(serving) - cpu_emfile_before;
  const std::string emfile_log = Log().substr(log_before_emfile);
  printf("[ fds      ] model holds %d descriptors: CPU %.2f s over 2 s with 20 clients waiting; "
         "log +%zu bytes\n",
         held, emfile_cpu, emfile_log.size());
  EXPECT_LT(emfile_cpu, 0.2);
  EXPECT_LT(emfile_log.size(), 1000u) << emfile_log;
  EXPECT_NE(emfile_log.find("HTTP: cannot accept connections: Too many open files (open-file limit 256)"),
            std::string::npos)
      << emfile_log;

  // Closed again: the waiting clients are served within the longest wait (1 s).
  const auto released = Clock::now();
  EXPECT_EQ(HoldFiles(0), 0);
  int served = 0;
  for (auto& c : waiting) served += c->ReadAll().rfind("HTTP/1.1 200", 0) == 0;
  const double wait = std::chrono::duration<double>(Clock::now() - released).count();
  printf("[ fds      ] descriptors back: %d of 20 waiting clients served %.2f s later\n", served, wait);
  EXPECT_EQ(served, 20);
  EXPECT_LT(wait, 3.0);
  const std::string after = Log().substr(log_before_emfile);
  EXPECT_TRUE(std::regex_search(after, std::regex("HTTP: accepting connections again after \\d+ failed "
                                                  "accept\\(s\\) over \\d+ ms")))
      << after;
  waiting.clear();
  const size_t fds_after = WaitForFdsAtMost(serving, baseline);
  printf("[ fds      ] descriptors open: %zu at the baseline, %zu after both faults\n", baseline, fds_after);
  EXPECT_LE(fds_after, baseline);
  EXPECT_TRUE(ServesHttp());
  EXPECT_TRUE(ServesGrpc());
}

/// Sends `bytes` on a connection of its own and reads until the server
/// closes it; what the server sent.
std::string Exchange(int port, const std::string& bytes) {
  testing::HttpConnection c(port);
  c.WriteRaw(bytes);
  return c.ReadAll();
}

std::string Post(const std::string& headers, const std::string& body) {
  return "POST /v2/models/two_io/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         headers + "\r\n\r\n" + body;
}

TEST_F(ConnectionFaultTest, SlowSendersLyingLengthsAndStormsLeaveNothingBehind) {
  Start({"--interpreters=2", "--http-read-timeout=2", "--max-message-size=1048576",
         "--model-config=slow:instance_count=1"});
  const pid_t serving = server_.serving_pid();
  ASSERT_TRUE(ServesHttp());
  ASSERT_TRUE(ServesGrpc());
  const size_t baseline = SettledFds(serving);

  // 1. Slow header senders (a byte every 200 ms, never a whole header) are cut
  // off at --http-read-timeout; a normal client is served meanwhile.
  constexpr int kSlow = 100;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) slow.push_back(testing::ConnectRaw(server_.http_port()));
  const auto began = Clock::now();
  std::vector<double> cut_after(kSlow, -1);
  int cut = 0;
  double normal_latency = -1;
  for (int tick = 0; cut < kSlow && Clock::now() - began < 6s; ++tick) {
    for (int i = 0; i < kSlow; ++i) {
      if (cut_after[i] >= 0) continue;
      const char* bytes = tick == 0 ? "POST /v2/models/two_io/infer HTTP/1.1\r\n" : "X";
      char buf[64];
      const bool closed = send(slow[i], bytes, strlen(bytes), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ||
                          recv(slow[i], buf, sizeof(buf), MSG_DONTWAIT) == 0;
      if (closed) {
        cut_after[i] = std::chrono::duration<double>(Clock::now() - began).count();
        ++cut;
      }
    }
    if (tick == 5) {
      const auto asked = Clock::now();
      EXPECT_TRUE(ServesHttp());
      normal_latency = std::chrono::duration<double>(Clock::now() - asked).count();
    }
    std::this_thread::sleep_for(200ms);
  }
  CloseAll(&slow);
  const auto [first, last] = std::minmax_element(cut_after.begin(), cut_after.end());
  printf("[ slow     ] %d of %d slow header senders cut off %.2f-%.2f s after connecting "
         "(--http-read-timeout=2); a normal request meanwhile took %.3f s\n",
         cut, kSlow, *first, *last, normal_latency);
  EXPECT_EQ(cut, kSlow);
  EXPECT_GE(*first, 1.9);
  EXPECT_LE(*last, 3.5);
  EXPECT_LT(normal_latency, 1.0);

  // 2. Content-Length that lies. Longer than the body sent: the server waits
  // for the rest until the read timeout, then closes without a reply.
  const std::string json = kTwoIoJson;
  auto asked = Clock::now();
  std::string reply = Exchange(server_.http_port(), Post("Content-Length: 1000", json));
  const double waited = std::chrono::duration<double>(Clock::now() - asked).count();
  printf("[ length   ] a body %zu bytes short of its Content-Length: closed after %.2f s, %zu bytes "
         "of reply\n", 1000 - json.size(), waited, reply.size());
  EXPECT_EQ(reply, "");
  EXPECT_GE(waited, 1.9);
  EXPECT_LT(waited, 3.5);
  // Shorter than the body: the body as declared does not decode (400); the
  // rest is read as the next request, which is no request (400), and closed.
  reply = Exchange(server_.http_port(), Post("Content-Length: 20", json));
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("HTTP/1.1 400", 1), std::string::npos) << reply;
  EXPECT_NE(reply.find("malformed HTTP request"), std::string::npos) << reply;
  // Over --max-message-size: 413 naming the flag, with the body never sent.
  reply = Exchange(server_.http_port(), Post("Content-Length: 2000000", ""));
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_NE(reply.find("--max-message-size"), std::string::npos) << reply;
  // Two lengths that disagree, or one that is no number: 400.
  for (const char* headers : {"Content-Length: 10\r\nContent-Length: 20", "Content-Length: -5",
                              "Content-Length: 1e3"}) {
    reply = Exchange(server_.http_port(), Post(headers, json));
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << headers << "\n" << reply;
  }
  EXPECT_TRUE(ServesHttp());

  // 3. A storm of deadlines and departures on a model with one instance:
  // gRPC calls whose 5-40 ms deadline passes while queued or running, gRPC
  // calls their clients cancel, HTTP clients that close after sending.
  ASSERT_EQ(Metric("manypy_requests_total", "slow"), 0);
  std::atomic<int> deadline_answers{0}, cancelled_answers{0}, other_answers{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(5 + (i * 7 + t) % 36));
        ModelInferResponse out;
        if (t % 2 == 0) {
          grpc::Status s = stub_->ModelInfer(&ctx, SlowRequest(30), &out);
          (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? deadline_answers : other_answers)++;
        } else if (t == 1 || t == 3) {
          grpc::ClientContext cancelled;
          std::thread cancel([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(5 + i % 20));
            cancelled.TryCancel();
          });
          grpc::Status s = stub_->ModelInfer(&cancelled, SlowRequest(30), &out);
          cancel.join();
          (s.error_code() == grpc::StatusCode::CANCELLED ? cancelled_answers : other_answers)++;
        } else {
          testing::HttpConnection c(server_.http_port());
          const std::string body = R"({"inputs":[{"name":"MS","datatype":"INT64","shape":[1,1],"data":[30]}]})";
          c.WriteRaw("POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
          std::this_thread::sleep_for(std::chrono::milliseconds(i % 10));
        }  // closed here
      }
    });
  }
  for (auto& c : clients) c.join();
  // Queues and in-flight gauges come back to 0; every request the server saw
  // ended as a success, a deadline or a cancel, and cancels are not failures.
  EXPECT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 0));
  EXPECT_TRUE(WaitForMetric("manypy_in_flight_executions", "slow", 0));
  std::this_thread::sleep_for(300ms);  // outcomes are counted just after their replies
  const double total = Metric("manypy_requests_total", "slow");
  const double ok = Metric("manypy_requests_total", "slow", "outcome=\"success\"");
  const double deadline = Metric("manypy_requests_total", "slow", "outcome=\"deadline_exceeded\"");
  const double cancels = Metric("manypy_requests_total", "slow", "outcome=\"cancelled\"");
  printf("[ storm    ] 120 requests (60 with 5-40 ms deadlines, 40 cancelled, 20 HTTP clients "
         "leaving): the server counted "
         "%.0f: %.0f success, %.0f deadline_exceeded, %.0f cancelled; clients saw %d deadlines, %d "
         "cancels, %d other\n",
         total, ok, deadline, cancels, deadline_answers.load(), cancelled_answers.load(),
         other_answers.load());
  EXPECT_EQ(other_answers.load(), 0);
  EXPECT_EQ(ok + deadline + cancels, total);
  EXPECT_GE(deadline, 1);
  EXPECT_GE(cancels, 1);
  EXPECT_LE(total, 120);
  // Statistics as Triton's: a deadline is a failure, a cancel is not.
  EXPECT_EQ(Statistics("slow").inference_stats().fail().count(), static_cast<uint64_t>(deadline));
  EXPECT_EQ(Statistics("slow").inference_stats().cancel().count(), static_cast<uint64_t>(cancels));

  // After it all: served, and the descriptors are back.
  ModelInferResponse out;
  EXPECT_TRUE(Infer(SlowRequest(1), &out).ok());
  EXPECT_TRUE(ServesHttp());
  const size_t fds_after = WaitForFdsAtMost(serving, baseline);
  printf("[ storm    ] descriptors open: %zu before, %zu after\n", baseline, fds_after);
  EXPECT_LE(fds_after, baseline);
}

}  // namespace
}  // namespace manypy
