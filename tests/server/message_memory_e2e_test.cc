// MessageMemoryTest: what a gRPC message over --max-message-size costs the
// real manypy-server. gRPC 1.51 reads such a message whole before refusing it
// (docs/operations.md, "Limits"); the memory must come back at once after,
// and the server must serve on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/test_util/resident_size.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr double kMiB = 1 << 20;

class MessageMemoryTest : public ServerTest {
 protected:
  /// A channel of its own (its own connection), able to send `bytes`.
  std::unique_ptr<GRPCInferenceService::Stub> OwnConnection() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxSendMessageSize(-1);
    return GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(server_.address(), grpc::InsecureChannelCredentials(), args));
  }
  /// Sends `request` on `copies` connections at once; the status codes seen.
  std::vector<grpc::StatusCode> SendAtOnce(const ModelInferRequest& request, int copies) {
    std::vector<std::unique_ptr<GRPCInferenceService::Stub>> stubs;
    for (int i = 0; i < copies; ++i) stubs.push_back(OwnConnection());
    std::vector<grpc::StatusCode> codes(copies);
    std::vector<std::thread> senders;
    for (int i = 0; i < copies; ++i) {
      senders.emplace_back([&, i] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 60s);
        ModelInferResponse out;
        codes[i] = stubs[i]->ModelInfer(&ctx, request, &out).error_code();
      });
    }
    for (auto& s : senders) s.join();
    return codes;
  }
  /// The serving process's resident size (VmRSS) and its peak so far (VmHWM), in MiB.
  double Rss() { return testing::StatusBytes(server_.serving_pid(), "VmRSS") / kMiB; }
  double Peak() { return testing::StatusBytes(server_.serving_pid(), "VmHWM") / kMiB; }
  /// The resident size once memory free for a whole second has been returned
  /// (read 1.5 s on, then until it stops falling, up to 4 s), in MiB.
  double RssSettled() {
    std::this_thread::sleep_for(1500ms);
    double now = Rss();
    for (auto deadline = Clock::now() + 2500ms; Clock::now() < deadline;) {
      std::this_thread::sleep_for(250ms);
      const double next = Rss();
      if (next >= now - 1) return next;
      now = next;
    }
    return now;
  }
  /// Seconds from now until the resident size is below `mib` (read every
  /// 50 ms), at most `limit`; `*rss` gets the last reading, in MiB.
  double SecondsUntilBelow(double mib, double limit, double* rss) {
    const auto began = Clock::now();
    double seconds = 0;
    while ((*rss = Rss()) >= mib && seconds < limit) {
      std::this_thread::sleep_for(50ms);
      seconds = std::chrono::duration<double>(Clock::now() - began).count();
    }
    return seconds;
  }
};

TEST_F(MessageMemoryTest, OversizedMessagesAreRefusedAndTheirMemoryComesBackAtOnce) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--interpreters=1",
               "--no-http", "--no-metrics"});
  ModelInferResponse out;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &out).ok());
  const double baseline = RssSettled();

  // 100 MiB against the default limit of 64 MiB. Back means within 32 MiB
  // of the resident size at rest (16 MiB kept free, up to 16 in tcmalloc's
  // per-thread and central caches, which are not returned).
  const double back = baseline + 32;
  ModelInferRequest big = TwoIoRequest(true);
  big.mutable_raw_input_contents(0)->append(100 << 20, '\0');
  auto sent = Clock::now();
  auto codes = SendAtOnce(big, 1);
  const double refused_after = std::chrono::duration<double>(Clock::now() - sent).count();
  EXPECT_EQ(codes[0], grpc::StatusCode::RESOURCE_EXHAUSTED);
  const double peak_one = Peak();
  double after_one = 0;
  const double back_one = SecondsUntilBelow(back, 6, &after_one);
  ASSERT_TRUE(Infer(TwoIoRequest(true), &out).ok());

  // Four at once, each on its own connection (the peak measured anew).
  std::ofstream(("/proc/" + std::to_string(server_.serving_pid()) + "/clear_refs").c_str()) << "5";
  codes = SendAtOnce(big, 4);
  for (auto code : codes) EXPECT_EQ(code, grpc::StatusCode::RESOURCE_EXHAUSTED);
  const double peak_four = Peak();
  double after_four = 0;
  const double back_four = SecondsUntilBelow(back, 6, &after_four);
  printf("[ message  ] RSS %.0f MiB at rest; one 100 MiB message: refused after %.2f s, peak %.0f MiB, "
         "%.0f MiB %.2f s after the refusal; four at once: peak %.0f MiB, %.0f MiB %.2f s after\n",
         baseline, refused_after, peak_one, after_one, back_one, peak_four, after_four, back_four);
  // Read whole before the refusal (gRPC 1.51): the peak holds the message...
  EXPECT_GT(peak_one, baseline + 90);
  // ... and the memory is back about a second after it is freed (the window;
  // connections close and free theirs within a second or so of the refusal).
  EXPECT_LT(after_one, back);
  EXPECT_LT(after_four, back);
  EXPECT_LT(back_one, 4);
  EXPECT_LT(back_four, 4);
  ASSERT_TRUE(Infer(TwoIoRequest(true), &out).ok());
}

}  // namespace
}  // namespace manypy
