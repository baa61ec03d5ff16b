#include "interpreters/file_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace manypy {
namespace {

namespace fs = std::filesystem;

class FileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("manypy_file_cache_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(FileCacheTest, HashDependsOnContentOnly) {
  std::ofstream(Path("a")) << "same bytes";
  std::ofstream(Path("b")) << "same bytes";
  std::ofstream(Path("c")) << "other bytes";
  auto a = HashFileContent(Path("a"));
  auto b = HashFileContent(Path("b"));
  auto c = HashFileContent(Path("c"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(HexDigest(*a).size(), 16u);
}

TEST_F(FileCacheTest, HashSeesRewrittenFile) {
  std::ofstream(Path("a")) << "version one";
  auto first = HashFileContent(Path("a"));
  fs::remove(Path("a"));
  std::ofstream(Path("a")) << "version two, longer";
  auto second = HashFileContent(Path("a"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(*first, *second);
}

TEST_F(FileCacheTest, MaterializePublishesCompleteFileOnce) {
  int calls = 0;
  auto make = [&](const std::string& tmp) {
    ++calls;
    std::ofstream(tmp) << "content";
    return Status::Ok();
  };
  ASSERT_TRUE(MaterializeAtomically(Path("out"), make).ok());
  ASSERT_TRUE(MaterializeAtomically(Path("out"), make).ok());
  EXPECT_EQ(calls, 1);
  std::ifstream in(Path("out"));
  std::string text;
  in >> text;
  EXPECT_EQ(text, "content");
}

TEST_F(FileCacheTest, FailedMaterializeLeavesNothingBehind) {
  Status s = MaterializeAtomically(Path("out"), [](const std::string& tmp) {
    std::ofstream(tmp) << "half written";
    return Internal("simulated failure");
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_FALSE(fs::exists(Path("out")));
  EXPECT_TRUE(fs::is_empty(dir_));  // no temporary left either
}

TEST_F(FileCacheTest, UnwritableDirectoryIsRejectedWithItsName) {
  std::ofstream(Path("plain_file")) << "x";
  Status s = EnsureWritableDirectory(Path("plain_file") + "/sub");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("plain_file"), std::string::npos);
}

TEST_F(FileCacheTest, RunProgramReportsFailureAndOutput) {
  EXPECT_TRUE(RunProgram("true", {}).ok());
  Status s = RunProgram("sh", {"-c", "echo broken-thing >&2; exit 3"});
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("broken-thing"), std::string::npos);
  Status missing = RunProgram("manypy-no-such-program", {});
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace manypy
