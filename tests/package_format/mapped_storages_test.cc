// MappedStorages: tensors over a sealed in-memory copy of the archive's stored storages that
// keep the copy alive, whose accidental writes never reach the file, and which the file's
// truncation or rewrite on disk cannot reach (it used to be SIGBUS).
#include "package_format/mapped_storages.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

class MappedStoragesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ZipBuilder zip;
    testing::AddValidModel(&zip, "model");
    path_ = dir_.File("model.mpk");
    testing::WriteFile(path_, zip.Finish());
    auto archive = PackageArchive::Open(path_);
    ASSERT_TRUE(archive.ok()) << archive.status().ToString();
    archive_ = std::move(*archive);
  }

  std::string Bytes(const at::Tensor& t) {
    return std::string(static_cast<const char*>(t.data_ptr()), t.numel());
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<PackageArchive> archive_;
};

TEST_F(MappedStoragesTest, TensorsPointIntoTheMapping) {
  auto mapped = MappedStorages::Map(*archive_);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  const auto& tensors = (*mapped)->tensors();
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ((*mapped)->size(), archive_->file_size());
  for (const StoredRecord& record : archive_->storages()) {
    const at::Tensor& t = tensors.at(record.name);
    EXPECT_EQ(t.scalar_type(), at::kByte);
    EXPECT_TRUE(t.device().is_cpu());
    EXPECT_EQ(t.dim(), 1);
    EXPECT_EQ(static_cast<uint64_t>(t.numel()), record.size);
    EXPECT_EQ(t.data_ptr(), (*mapped)->base() + record.data_offset) << record.name;
  }
  EXPECT_EQ(Bytes(tensors.at(".data/0.storage")), testing::StorageContent(0));
  EXPECT_EQ(Bytes(tensors.at(".data/1.storage")), testing::StorageContent(1));
}

TEST_F(MappedStoragesTest, TensorsOutliveTheMapperAndTheArchive) {
  at::Tensor kept;
  {
    auto mapped = MappedStorages::Map(*archive_);
    ASSERT_TRUE(mapped.ok());
    kept = (*mapped)->tensors().at(".data/0.storage");
  }
  archive_.reset();  // closes the file descriptor; the mapping stays
  EXPECT_EQ(Bytes(kept), testing::StorageContent(0));
  // Still usable as a tensor: viewed as the floats a model's weights would be, and summed.
  EXPECT_EQ(kept.view(at::kFloat).numel(), 1024);
  int64_t expected = 0;
  for (unsigned char c : testing::StorageContent(0)) expected += c;
  EXPECT_EQ(kept.sum().item<int64_t>(), expected);
}

TEST_F(MappedStoragesTest, WritesStayPrivate) {
  const std::string before = testing::ReadFile(path_);
  {
    auto mapped = MappedStorages::Map(*archive_);
    ASSERT_TRUE(mapped.ok());
    at::Tensor t = (*mapped)->tensors().at(".data/1.storage");
    t.fill_(7);  // must neither fault nor reach the file
    EXPECT_EQ(t[0].item<uint8_t>(), 7);
    auto again = MappedStorages::Map(*archive_);  // a fresh mapping sees the file's bytes
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(Bytes((*again)->tensors().at(".data/1.storage")), testing::StorageContent(1));
  }
  EXPECT_EQ(testing::ReadFile(path_), before);
}

// Regression: the archive was mapped straight from its file, so truncating the file on disk
// while its model was loaded made the next read of a weight SIGBUS the whole server.
TEST_F(MappedStoragesTest, TruncatedOrRewrittenFileLeavesTheTensorsIntact) {
  auto mapped = MappedStorages::Map(*archive_);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  EXPECT_EQ(Bytes((*mapped)->tensors().at(".data/0.storage")), testing::StorageContent(0));
  testing::WriteFile(path_, std::string(archive_->file_size(), 'x'));  // same size, new bytes
  EXPECT_EQ(Bytes((*mapped)->tensors().at(".data/1.storage")), testing::StorageContent(1));
}

TEST_F(MappedStoragesTest, TheCopyIsSealedAndReadableThroughItsPath) {
  auto mapped = MappedStorages::Map(*archive_);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ(testing::ReadFile((*mapped)->copy_path()), testing::ReadFile(path_));
  int fd = open((*mapped)->copy_path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(pwrite(fd, "z", 1, 0), -1);  // F_SEAL_WRITE
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, 0), 0);  // F_SEAL_SHRINK
  close(fd);
}

TEST_F(MappedStoragesTest, FileChangedSinceValidationIsRefused) {
  testing::WriteFile(path_, testing::ReadFile(path_) + "tail");
  auto mapped = MappedStorages::Map(*archive_);
  EXPECT_EQ(mapped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(mapped.status().message().find("changed size"), std::string::npos)
      << mapped.status().ToString();
}

}  // namespace
}  // namespace manypy
