#include "interpreters/elf_object.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "interpreters/file_cache.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

// This release's libtorch (1.13 on Debian 12, 2.6 on Debian 13).
const std::string kTorchSo = MANYPY_TEST_TORCH_SOVERSION;
const std::string kTorchPython = "/usr/lib/x86_64-linux-gnu/libtorch_python.so." + kTorchSo;
const std::string kC10 = "/usr/lib/x86_64-linux-gnu/libc10.so." + kTorchSo;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("manypy_elf_test_" + name)).string();
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ElfObjectTest, ReadsSonameNeededAndPythonReferences) {
  auto info = ReadElfDynamicInfo(kTorchPython);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->soname, "libtorch_python.so." + kTorchSo);
  EXPECT_TRUE(Contains(info->needed, "libtorch_cpu.so." + kTorchSo));
  EXPECT_TRUE(info->references_python);
}

TEST(ElfObjectTest, LibraryWithoutPythonIsNotPythonDependent) {
  auto info = ReadElfDynamicInfo(kC10);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->references_python);
}

TEST(ElfObjectTest, ReadsRunpathOfTorchExtension) {
  auto info = ReadElfDynamicInfo(MANYPY_TEST_TORCH_C);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(Contains(info->needed, "libtorch_python.so." + kTorchSo));
  ASSERT_EQ(info->runpath.size(), 1u);
  EXPECT_EQ(info->runpath[0], "$ORIGIN/lib");
}

TEST(ElfObjectTest, RejectsNonElfFile) {
  std::string path = TempPath("not_elf");
  std::ofstream(path) << "this is plainly not an ELF object, but long enough to have a header..";
  auto info = ReadElfDynamicInfo(path);
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(info.status().message().find(path), std::string::npos);
  fs::remove(path);
}

TEST(ElfObjectTest, RejectsTruncatedElfWithoutCrashing) {
  std::string path = TempPath("truncated");
  ASSERT_TRUE(CopyFile(kC10, path).ok());
  fs::resize_file(path, 4096);
  auto info = ReadElfDynamicInfo(path);
  EXPECT_FALSE(info.ok());
  fs::remove(path);
}

TEST(ElfObjectTest, MissingFileIsNotFound) {
  auto info = ReadElfDynamicInfo("/nonexistent/libnothing.so");
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound);
}

TEST(ElfObjectTest, RewritesGnuUniqueSymbolsToGlobal) {
  std::string path = TempPath("torch_python_copy.so");
  ASSERT_TRUE(CopyFile(kTorchPython, path).ok());
  auto changed = RewriteGnuUniqueToGlobal(path);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_GT(*changed, 0);  // libtorch_python has 58 in .dynsym on 1.13, 130 on 2.6
  auto again = RewriteGnuUniqueToGlobal(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  // Still a valid object afterwards.
  auto info = ReadElfDynamicInfo(path);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->soname, "libtorch_python.so." + kTorchSo);
  fs::remove(path);
}

}  // namespace
}  // namespace manypy
