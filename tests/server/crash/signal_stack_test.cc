// Alternate signal stacks (server/crash/signal_stack.h) in a binary that links
// thread_start.cc as manypy-serving does: every thread has one, however it was
// started (pthread_create called here or from libstdc++), each is unmapped when
// its thread ends, and a stack overflow, on a frontend thread or on main, still
// ends in a crash report that says so.
#include "server/crash/signal_stack.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <thread>

#include "common/thread_name.h"
#include "server/crash/crash_handler.h"

namespace manypy {
namespace {

size_t Mappings() {
  std::ifstream maps("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

void* AskForStack(void* out) {
  *static_cast<bool*>(out) = ThisThreadHasASignalStack();
  return nullptr;
}

TEST(SignalStackTest, EveryThreadStartsWithOne) {
  bool has = false;
  std::thread([&] { has = ThisThreadHasASignalStack(); }).join();  // pthread_create from libstdc++
  EXPECT_TRUE(has);
  has = false;
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, nullptr, AskForStack, &has), 0);
  pthread_join(t, nullptr);
  EXPECT_TRUE(has);
}

TEST(SignalStackTest, EachIsUnmappedWhenItsThreadEnds) {
  std::thread([] {}).join();  // the key and anything else made once, first
  const size_t before = Mappings();
  for (int i = 0; i < 500; ++i) std::thread([] {}).join();
  // 500 leaked stacks would be 500 to 1,000 more mappings.
  EXPECT_LT(Mappings(), before + 20);
}

// Recurses until the stack overflows; the buffer keeps each frame real, and
// the flag the compiler cannot see through keeps the recursion a recursion.
volatile bool g_deeper = true;
int Recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  return (g_deeper ? Recurse(depth + 1) : 0) + frame[0];
}

void OverflowOnAThreadNamed(const char* name) {
  InstallCrashHandler({});
  std::thread([name] {
    NameThisThread(name);
    Recurse(0);
  }).join();
}

TEST(SignalStackDeathTest, AFrontendThreadsOverflowIsReported) {
  EXPECT_EXIT(OverflowOnAThreadNamed("manypy-http"), testing::KilledBySignal(SIGSEGV),
              "CRASH SIGSEGV \\(stack overflow\\) in process [0-9]+, outside any model call, on "
              "thread 'manypy-http' \\(a frontend thread\\)");
}

TEST(SignalStackDeathTest, MainsOverflowIsReported) {
  EXPECT_EXIT(
      {
        InstallCrashHandler({});
        NameThisThread("main-thread");
        Recurse(0);
      },
      testing::KilledBySignal(SIGSEGV),
      "CRASH SIGSEGV \\(stack overflow\\) in process [0-9]+, outside any model call, on thread "
      "'main-thread'\n");
}

// As faulthandler does: on a fault, puts back the handler it displaced and
// raises the signal again (which then carries no fault address).
struct sigaction g_displaced;
void RaiseAgainLikeFaulthandler(int signal) {
  sigaction(signal, &g_displaced, nullptr);
  raise(signal);
}

TEST(SignalStackDeathTest, AnOverflowIsNamedThroughAHandlerThatRaisesAgain) {
  EXPECT_EXIT(
      {
        InstallCrashHandler({});
        struct sigaction raising {};
        raising.sa_handler = RaiseAgainLikeFaulthandler;
        raising.sa_flags = SA_NODEFER | SA_ONSTACK;
        sigaction(SIGSEGV, &raising, &g_displaced);
        RecordFaultSitesFirst();
        std::thread([] {
          NameThisThread("manypy-worker-0");
          Recurse(0);
        }).join();
      },
      testing::KilledBySignal(SIGSEGV),
      "CRASH SIGSEGV \\(stack overflow\\) in process [0-9]+, outside any model call, on thread "
      "'manypy-worker-0'\n");
}

TEST(SignalStackDeathTest, ANullReadIsNoOverflow) {
  EXPECT_EXIT(
      {
        InstallCrashHandler({});
        NameThisThread("main-thread");
        volatile int* null = nullptr;
        *null = 1;
      },
      testing::KilledBySignal(SIGSEGV), "CRASH SIGSEGV in process [0-9]+, outside any model call");
}

}  // namespace
}  // namespace manypy
