// AotiModel (platform torch_aoti) on the test repository's double_sum_aoti, an
// AOTInductor archive compiled by make_server_test_models.py: loaded as the
// model manager loads it (LoadArchive, no interpreter pool: one model in its
// container), called at every batch size its batch dimension was compiled for
// and from concurrent threads; what it holds; ReadAotiPackage on its .pt2.
// Built only where libtorch has AOTInductor's package loader (PyTorch >= 2.6).
#include "server/lifecycle/aoti_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <atomic>
#include <thread>

#include "server/lifecycle/aoti_package.h"
#include "server/lifecycle/archive_loader.h"

namespace manypy {
namespace {

const std::string kArchive = std::string(MANYPY_TEST_REPOSITORY) + "/aoti/double_sum_aoti.mpk";

std::shared_ptr<Executable> LoadDoubleSum() {
  Manifest manifest;
  auto loaded = LoadArchive(/*pool=*/nullptr, kArchive, &manifest);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(manifest.platform, kAotiPlatform);
  return loaded.ok() ? *loaded : nullptr;
}

// DOUBLE = 2x and SUM = the row sums, as the eager model answers.
::testing::AssertionResult AnswersAsEager(Executable& model, const at::Tensor& x) {
  InterruptHook hook;
  auto out = model.Run(0, {Value(x)}, &hook);
  if (!out.ok()) return ::testing::AssertionFailure() << out.status().ToString();
  if (out->size() != 2) return ::testing::AssertionFailure() << out->size() << " outputs";
  const at::Tensor& doubled = (*out)[0].to_tensor();
  const at::Tensor& sum = (*out)[1].to_tensor();
  if (!torch::equal(doubled, x * 2))
    return ::testing::AssertionFailure() << "DOUBLE differs for a batch of " << x.size(0);
  if (!torch::allclose(sum, x.sum(1, true), 1e-5, 1e-5))
    return ::testing::AssertionFailure() << "SUM differs for a batch of " << x.size(0);
  return ::testing::AssertionSuccess();
}

TEST(AotiModelTest, EveryBatchSizeUpToTheMaximumAnswersAsEager) {
  auto model = LoadDoubleSum();
  ASSERT_NE(model, nullptr);
  EXPECT_FALSE(model->interruptible());
  for (int64_t batch = 1; batch <= 16; ++batch)
    EXPECT_TRUE(AnswersAsEager(*model, torch::randn({batch, 3})));
}

TEST(AotiModelTest, AnInputLaidOutOtherwiseIsMadeContiguousFirst) {
  auto model = LoadDoubleSum();
  ASSERT_NE(model, nullptr);
  at::Tensor transposed = torch::randn({3, 5}).t();  // [5, 3], strides (1, 5)
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_TRUE(AnswersAsEager(*model, transposed));
}

// 4 threads x 50 calls of every batch size, on containers of 4 models (one
// per thread) and of 1 (each call waits for the one model): every answer its own.
TEST(AotiModelTest, ConcurrentCallsAnswerAsEagerWithAModelEachOrWaitingForOne) {
  for (size_t models : {4u, 1u}) {
    auto archive = PackageArchive::Open(kArchive);
    ASSERT_TRUE(archive.ok()) << archive.status().ToString();
    auto model = AotiModel::Load(std::move(*archive), models);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    constexpr int kThreads = 4;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          if (!AnswersAsEager(**model, torch::randn({1 + (t * 50 + i) % 16, 3}))) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0) << models << " model(s)";
  }
}

// What a load holds is its shared object, once however many models its
// container has (they share its constants): no per-slot part.
TEST(AotiModelTest, ItsMemoryIsItsSharedObjectOnceForEveryModel) {
  auto archive = PackageArchive::Open(kArchive);
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  auto package = ReadAotiPackage(**archive, "model/model.pt2");
  ASSERT_TRUE(package.ok()) << package.status().ToString();
  for (size_t models : {1u, 4u}) {
    auto reopened = PackageArchive::Open(kArchive);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    auto model = AotiModel::Load(std::move(*reopened), models);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    MemoryFootprint memory = (*model)->Memory();
    EXPECT_EQ(memory.shared_bytes, static_cast<int64_t>(package->so_size)) << models;
    EXPECT_TRUE(memory.per_slot_bytes.empty()) << models;
  }
}

// The shared object is found as a byte range of the archive's file (never
// read whole into memory): an ELF file of the size the package says.
TEST(AotiModelTest, ThePackageGivesItsSharedObjectAndDevice) {
  auto archive = PackageArchive::Open(kArchive);
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  auto package = ReadAotiPackage(**archive, "model/model.pt2");
  ASSERT_TRUE(package.ok()) << package.status().ToString();
  EXPECT_EQ(package->device, "cpu");
  EXPECT_EQ(package->so_name.substr(package->so_name.size() - 3), ".so");
  ASSERT_GT(package->so_size, 64u);
  ASSERT_LT(package->so_offset + package->so_size, (*archive)->file_size());
  char magic[4];
  ASSERT_EQ(pread((*archive)->fd(), magic, 4, static_cast<off_t>(package->so_offset)), 4);
  EXPECT_EQ(std::string(magic, 4), "\x7f" "ELF");
  EXPECT_EQ(ReadAotiPackage(**archive, "model/missing.pt2").status().code(),
            StatusCode::kNotFound);

  auto bad_archive = PackageArchive::Open(std::string(MANYPY_TEST_REPOSITORY) +
                                          "/aoti_refused/not_a_package.mpk");
  ASSERT_TRUE(bad_archive.ok()) << bad_archive.status().ToString();
  auto bad = ReadAotiPackage(**bad_archive, "model/model.pt2");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not_a_package.mpk: the AOTInductor package is not a zip"),
            std::string::npos)
      << bad.status().message();
}

TEST(AotiModelTest, AnArchiveFromAnotherReleaseIsRefusedNamingBoth) {
  Manifest manifest;
  auto loaded = LoadArchive(nullptr, std::string(MANYPY_TEST_REPOSITORY) +
                                         "/aoti_refused/compiled_by_2_5_1.mpk", &manifest);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("under PyTorch 2.5.1, but this server runs PyTorch 2."),
            std::string::npos)
      << loaded.status().message();
  loaded = LoadArchive(nullptr, std::string(MANYPY_TEST_REPOSITORY) +
                                    "/aoti_refused/not_a_package.mpk", &manifest);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("the AOTInductor package is not a zip"),
            std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace manypy
