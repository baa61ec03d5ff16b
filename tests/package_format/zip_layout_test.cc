// ReadZipLayout: data offsets from the central directory and local headers (plain and ZIP64
// forms), and refusal of overlapping, inconsistent, truncated or corrupted zips without crashing.
#include "package_format/zip_layout.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <random>

#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

using testing::ZipBuilder;

// The layout of `bytes`, read through an anonymous in-memory file.
StatusOr<std::vector<ZipEntryLayout>> Layout(const std::string& bytes, uint64_t max = 1000) {
  const int fd = memfd_create("zip_layout_test", MFD_CLOEXEC);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    return Internal("memfd failed");
  auto result = ReadZipLayout(fd, bytes.size(), max);
  close(fd);
  return result;
}

TEST(ZipLayoutTest, FindsEachEntrysData) {
  for (bool zip64 : {false, true}) {
    ZipBuilder zip;
    const uint64_t a = zip.Add("root/a.txt", "hello");
    const uint64_t b = zip.Add("root/.data/0.storage", testing::Pattern(1000, 3), true);
    const std::string bytes = zip.Finish(zip64);
    StatusOr<std::vector<ZipEntryLayout>> layout = Layout(bytes);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    ASSERT_EQ(layout->size(), 2u);
    EXPECT_EQ((*layout)[0].name, "root/a.txt");
    EXPECT_EQ((*layout)[0].data_offset, a);
    EXPECT_EQ((*layout)[0].local_header_offset, 0u);
    EXPECT_EQ((*layout)[1].data_offset, b);
    EXPECT_EQ(b % 64, 0u);
    EXPECT_EQ((*layout)[1].compressed_size, 1000u);
    EXPECT_EQ((*layout)[1].uncompressed_size, 1000u);
    EXPECT_EQ((*layout)[1].method, 0);
    EXPECT_EQ(bytes.substr(b, 1000), testing::Pattern(1000, 3)) << "zip64=" << zip64;
  }
}

// A zip stored inside another (an AOTInductor .pt2 in a model archive): its
// entries' offsets are the outer file's, so their bytes can be read in place.
TEST(ZipLayoutTest, FindsTheEntriesOfAZipStoredInAnother) {
  for (bool zip64 : {false, true}) {
    ZipBuilder inner;
    const uint64_t so = inner.Add("pkg/data/aotinductor/model/m.so", testing::Pattern(3000, 5), true);
    const std::string inner_bytes = inner.Finish(zip64);
    ZipBuilder outer;
    outer.Add("root/a.txt", "hello");
    const uint64_t base = outer.Add("root/model/model.pt2", inner_bytes, true);
    const std::string bytes = outer.Finish();
    const int fd = memfd_create("zip_layout_test", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    auto layout = ReadNestedZipLayout(fd, base, inner_bytes.size(), 10);
    auto whole = ReadNestedZipLayout(fd, 0, bytes.size(), 10);  // the outer zip itself
    auto offset_wrong = ReadNestedZipLayout(fd, base + 1, inner_bytes.size() - 1, 10);
    close(fd);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    ASSERT_EQ(layout->size(), 1u);
    EXPECT_EQ((*layout)[0].local_header_offset, base);
    EXPECT_EQ((*layout)[0].data_offset, base + so);
    EXPECT_EQ(bytes.substr(base + so, 3000), testing::Pattern(3000, 5)) << "zip64=" << zip64;
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    EXPECT_EQ(whole->size(), 2u);
    EXPECT_FALSE(offset_wrong.ok());
  }
}

TEST(ZipLayoutTest, RejectsAnEntryHiddenInsideAnother) {
  // The classic overlapping-entries zip bomb shape: b's local header lies in a's data.
  ZipBuilder zip;
  const uint64_t a_data = zip.Add("root/a.bin", ZipBuilder::LocalRecord("root/b.bin", "inner"));
  zip.AddCentralOnly("root/b.bin", "inner", a_data);
  StatusOr<std::vector<ZipEntryLayout>> layout = Layout(zip.Finish());
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("'root/a.bin' and 'root/b.bin' overlap"),
            std::string::npos)
      << layout.status().message();
}

TEST(ZipLayoutTest, RejectsALocalHeaderNamingAnotherEntry) {
  ZipBuilder zip;
  zip.Add("root/a.bin", "x");
  zip.AddCentralOnly("root/b.bin", "x", 0);
  StatusOr<std::vector<ZipEntryLayout>> layout = Layout(zip.Finish());
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("'root/b.bin'): local header disagrees"),
            std::string::npos)
      << layout.status().message();
}

TEST(ZipLayoutTest, RejectsTrailingBytesAndTooManyEntries) {
  ZipBuilder zip;
  zip.Add("root/a", "1");
  zip.Add("root/b", "2");
  StatusOr<std::vector<ZipEntryLayout>> trailing = Layout(zip.Finish() + "junk");
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.status().message().find("no End Of Central Directory"), std::string::npos);
  StatusOr<std::vector<ZipEntryLayout>> many = Layout(zip.Finish(), /*max=*/1);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("2 entries, more than the limit of 1"), std::string::npos)
      << many.status().message();
}

TEST(ZipLayoutTest, EscapesNamesForMessages) {
  EXPECT_EQ(EscapeForMessage(std::string("a\0b\\c'\xff", 7)), "a\\x00b\\x5cc\\x27\\xff");
}

// Every truncation and many single-byte corruptions: an error or a consistent layout, never
// a crash, hang or out-of-bounds read (run under ASan to see the last).
TEST(ZipLayoutTest, SurvivesTruncationAndCorruption) {
  for (bool zip64 : {false, true}) {
    ZipBuilder zip;
    testing::AddValidModel(&zip, "root");
    const std::string bytes = zip.Finish(zip64);
    for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(Layout(bytes.substr(0, n)).ok()) << n;
    std::mt19937 rng(42);
    for (int trial = 0; trial < 3000; ++trial) {
      std::string bad = bytes;
      const size_t pos = bad.size() - 1 - rng() % std::min<size_t>(bad.size(), 600);
      bad[pos] = static_cast<char>(rng());
      StatusOr<std::vector<ZipEntryLayout>> layout = Layout(bad);
      if (!layout.ok()) continue;
      for (const ZipEntryLayout& e : *layout)
        EXPECT_LE(e.data_offset + e.compressed_size, bad.size());
    }
  }
}

}  // namespace
}  // namespace manypy
