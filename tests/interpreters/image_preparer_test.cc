#include "interpreters/image_preparer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "interpreters/elf_object.h"
#include "interpreters/file_cache.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

class ImagePreparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = (fs::temp_directory_path() / ("manypy_preparer_test_" + std::to_string(getpid()))).string();
  }
  void TearDown() override { fs::remove_all(cache_); }
  ImagePreparer::Options Options() const {
    return {cache_, MANYPY_LIBPYTHON_FOR_TESTS, MANYPY_TEST_SHIM_LIBRARY, "patchelf"};
  }
  std::unique_ptr<ImagePreparer> Make() {
    auto p = ImagePreparer::Create(Options());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::vector<std::string> LeftoverTemporaries() const {
    std::vector<std::string> out;
    for (auto& e : fs::recursive_directory_iterator(cache_)) {
      if (e.path().string().find(".tmp.") != std::string::npos) out.push_back(e.path());
    }
    return out;
  }
  std::string cache_;
};

bool HasNeededContaining(const ElfDynamicInfo& info, const std::string& part) {
  return std::any_of(info.needed.begin(), info.needed.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

TEST_F(ImagePreparerTest, ShimCopyIsLinkedToThisSlotsPrivateLibraries) {
  auto preparer = Make();
  ASSERT_NE(preparer, nullptr);
  auto image = preparer->PrepareInterpreter(7);
  ASSERT_TRUE(image.ok()) << image.status().ToString();

  auto libpython = ReadElfDynamicInfo(image->libpython);
  ASSERT_TRUE(libpython.ok());
  EXPECT_EQ(libpython->soname, std::string("libpython") + MANYPY_TEST_PYTHON_VERSION + "-manypy7.so");

  auto shim = ReadElfDynamicInfo(image->shim);
  ASSERT_TRUE(shim.ok());
  EXPECT_TRUE(HasNeededContaining(*shim, image->libpython));
  EXPECT_TRUE(HasNeededContaining(*shim, "libtorch_python-manypy7.so"));
  EXPECT_FALSE(HasNeededContaining(*shim, std::string("libpython") + MANYPY_TEST_PYTHON_VERSION + ".so"));
  EXPECT_TRUE(LeftoverTemporaries().empty());
}

TEST_F(ImagePreparerTest, PythonDependentLibraryCopyHasNoUniqueSymbols) {
  auto preparer = Make();
  ASSERT_NE(preparer, nullptr);
  auto copy = preparer->PrepareObject(3, std::string("/usr/lib/x86_64-linux-gnu/libtorch_python.so.") + MANYPY_TEST_TORCH_SOVERSION);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto info = ReadElfDynamicInfo(*copy);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->soname, "libtorch_python-manypy3.so");
  EXPECT_TRUE(HasNeededContaining(*info, std::string("libpython") + MANYPY_TEST_PYTHON_VERSION + "-manypy3.so"));
  std::string scratch = cache_ + "/scratch.so";
  ASSERT_TRUE(CopyFile(*copy, scratch).ok());
  auto changed = RewriteGnuUniqueToGlobal(scratch);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 0);
}

TEST_F(ImagePreparerTest, OriginInSearchPathIsPinnedToOriginalDirectory) {
  auto preparer = Make();
  ASSERT_NE(preparer, nullptr);
  auto copy = preparer->PrepareObject(
      1, MANYPY_TEST_TORCH_C);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto info = ReadElfDynamicInfo(*copy);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->runpath.size(), 1u);
  EXPECT_EQ(info->runpath[0], "/usr/lib/python3/dist-packages/torch/lib");
  EXPECT_TRUE(HasNeededContaining(*info, "libtorch_python-manypy1.so"));
}

TEST_F(ImagePreparerTest, SecondPreparationReusesTheCachedFiles) {
  std::string first_path;
  fs::file_time_type first_time;
  {
    auto preparer = Make();
    auto image = preparer->PrepareInterpreter(2);
    ASSERT_TRUE(image.ok());
    first_path = image->shim;
    first_time = fs::last_write_time(first_path);
  }
  auto preparer = Make();
  auto image = preparer->PrepareInterpreter(2);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->shim, first_path);
  EXPECT_EQ(fs::last_write_time(first_path), first_time);
}

TEST_F(ImagePreparerTest, ConcurrentPreparersAgreeAndLeaveNoTemporaries) {
  std::vector<std::string> shims(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto preparer = ImagePreparer::Create(Options());  // as if separate processes
      ASSERT_TRUE(preparer.ok());
      auto image = (*preparer)->PrepareInterpreter(5);
      ASSERT_TRUE(image.ok()) << image.status().ToString();
      shims[t] = image->shim;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shims[0], shims[1]);
  EXPECT_EQ(shims[1], shims[2]);
  EXPECT_TRUE(ReadElfDynamicInfo(shims[0]).ok());
  EXPECT_TRUE(LeftoverTemporaries().empty());
}

TEST_F(ImagePreparerTest, MissingLibpythonIsNamed) {
  auto options = Options();
  options.libpython = "/nonexistent/libpython3.11.so.1.0";
  auto preparer = ImagePreparer::Create(options);
  EXPECT_EQ(preparer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(preparer.status().message().find("/nonexistent/libpython3.11.so.1.0"), std::string::npos);
}

TEST_F(ImagePreparerTest, UnusableCacheDirectoryIsNamed) {
  auto options = Options();
  options.cache_dir = "/proc/manypy-cannot-create-this";
  auto preparer = ImagePreparer::Create(options);
  EXPECT_EQ(preparer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(preparer.status().message().find("/proc/manypy-cannot-create-this"), std::string::npos);
}

}  // namespace
}  // namespace manypy
