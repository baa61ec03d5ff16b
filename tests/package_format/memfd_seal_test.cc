// SealAgainstChanges: a page reference held for a moment (here a pipe's, as
// splice leaves one) is waited out; one held for good fails naming the file;
// a sealed memfd refuses writes.
#include "package_format/memfd_seal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;

// A 64 KiB memfd, and a pipe holding a reference to its first page.
class MemfdSealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memfd_ = memfd_create("manypy-seal-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_GE(memfd_, 0);
    std::string bytes(64 << 10, 'x');
    ASSERT_EQ(write(memfd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(pipe(pipe_), 0);
    loff_t offset = 0;
    // splice moves a reference to the page into the pipe, not a copy of it.
    ASSERT_EQ(splice(memfd_, &offset, pipe_[1], nullptr, 4096, 0), 4096);
  }
  void TearDown() override {
    for (int fd : {memfd_, pipe_[0], pipe_[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  /// Reads the page out of the pipe (dropping its reference).
  void DrainPipe() {
    char page[4096];
    ASSERT_EQ(read(pipe_[0], page, sizeof(page)), 4096);
  }

  int memfd_ = -1;
  int pipe_[2] = {-1, -1};
};

TEST_F(MemfdSealTest, AReferenceHeldForAMomentIsWaitedOut) {
  // Held past the kernel's own wait (about 150 ms) before it goes.
  std::thread reader([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    DrainPipe();
  });
  Clock::time_point start = Clock::now();
  Status sealed = SealAgainstChanges(memfd_, "model.mpk");
  auto waited = Clock::now() - start;
  reader.join();
  ASSERT_TRUE(sealed.ok()) << sealed.ToString();
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  char byte = 'y';
  EXPECT_EQ(pwrite(memfd_, &byte, 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(fcntl(memfd_, F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
}

TEST_F(MemfdSealTest, AReferenceHeldForGoodFailsNamingTheFile) {
  Status sealed = SealAgainstChanges(memfd_, "/models/model.mpk");
  EXPECT_EQ(sealed.code(), StatusCode::kInternal);
  EXPECT_EQ(sealed.message(),
            "/models/model.mpk: sealing the in-memory copy failed: Device or resource busy");
  DrainPipe();
  EXPECT_TRUE(SealAgainstChanges(memfd_, "/models/model.mpk").ok());
}

}  // namespace
}  // namespace manypy
