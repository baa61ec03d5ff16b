#include "tests/package_format/test_zip.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zip.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace manypy::testing {
namespace {

void Put16(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string* out, uint32_t v) { Put16(out, v & 0xffff), Put16(out, v >> 16); }
void Put64(std::string* out, uint64_t v) {
  Put32(out, static_cast<uint32_t>(v)), Put32(out, static_cast<uint32_t>(v >> 32));
}

constexpr uint32_t kDosDate = 0x21;  // 1980-01-01

// A stored entry's local header; `extra` is written as given.
std::string LocalHeader(const std::string& name, const std::string& data,
                        const std::string& extra) {
  std::string h;
  Put32(&h, 0x04034b50);
  Put16(&h, 20), Put16(&h, 0), Put16(&h, 0), Put16(&h, 0), Put16(&h, kDosDate);
  Put32(&h, Crc32(data));
  Put32(&h, static_cast<uint32_t>(data.size())), Put32(&h, static_cast<uint32_t>(data.size()));
  Put16(&h, static_cast<uint32_t>(name.size())), Put16(&h, static_cast<uint32_t>(extra.size()));
  return h + name + extra;
}

// PyTorch's padding extra field: id "FB", then filler bringing the data to the boundary.
std::string Padding(uint64_t header_end) {
  uint64_t pad = (64 - (header_end + 4) % 64) % 64;
  std::string extra;
  Put16(&extra, 0x4246), Put16(&extra, static_cast<uint32_t>(pad));
  return extra + std::string(pad, 'Z');
}

}  // namespace

uint32_t Crc32(const std::string& data) {
  uint32_t crc = 0xFFFFFFFF;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320 & (0u - (crc & 1)));
  }
  return ~crc;
}

uint64_t ZipBuilder::Add(const std::string& name, const std::string& data, bool align64,
                         bool misalign) {
  const uint64_t offset = bytes_.size();
  std::string extra;
  const uint64_t header_end = offset + 30 + name.size();
  if (align64) extra = Padding(header_end);
  if (misalign) extra = Padding(header_end - 1);  // data one byte past a boundary
  bytes_ += LocalHeader(name, data, extra);
  const uint64_t data_offset = bytes_.size();
  bytes_ += data;
  central_.push_back({name, Crc32(data), data.size(), offset});
  return data_offset;
}

void ZipBuilder::AddCentralOnly(const std::string& name, const std::string& data,
                                uint64_t local_offset) {
  central_.push_back({name, Crc32(data), data.size(), local_offset});
}

std::string ZipBuilder::LocalRecord(const std::string& name, const std::string& data) {
  return LocalHeader(name, data, "") + data;
}

std::string ZipBuilder::Finish(bool zip64) const {
  std::string out = bytes_;
  const uint64_t cd_offset = out.size();
  for (const Central& c : central_) {
    std::string extra;
    // ZIP64: sizes and offset all-ones, the real values in the extra field (APPNOTE 4.5.3).
    if (zip64) {
      Put16(&extra, 0x0001), Put16(&extra, 24);
      Put64(&extra, c.size), Put64(&extra, c.size), Put64(&extra, c.local_offset);
    }
    const uint32_t size32 = zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(c.size);
    Put32(&out, 0x02014b50);
    Put16(&out, 0x031e), Put16(&out, zip64 ? 45 : 20), Put16(&out, 0), Put16(&out, 0);
    Put16(&out, 0), Put16(&out, kDosDate);
    Put32(&out, c.crc), Put32(&out, size32), Put32(&out, size32);
    Put16(&out, static_cast<uint32_t>(c.name.size())),
        Put16(&out, static_cast<uint32_t>(extra.size()));
    Put16(&out, 0), Put16(&out, 0), Put16(&out, 0), Put32(&out, 0);
    Put32(&out, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(c.local_offset));
    out += c.name + extra;
  }
  const uint64_t cd_size = out.size() - cd_offset, count = central_.size();
  if (zip64) {
    const uint64_t record = out.size();
    Put32(&out, 0x06064b50), Put64(&out, 44), Put16(&out, 45), Put16(&out, 45);
    Put32(&out, 0), Put32(&out, 0), Put64(&out, count), Put64(&out, count);
    Put64(&out, cd_size), Put64(&out, cd_offset);
    Put32(&out, 0x07064b50), Put32(&out, 0), Put64(&out, record), Put32(&out, 1);
  }
  Put32(&out, 0x06054b50), Put16(&out, 0), Put16(&out, 0);
  Put16(&out, zip64 ? 0xFFFF : static_cast<uint32_t>(count));
  Put16(&out, zip64 ? 0xFFFF : static_cast<uint32_t>(count));
  Put32(&out, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(cd_size));
  Put32(&out, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(cd_offset));
  Put16(&out, 0);
  return out;
}

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string templ = std::string(base != nullptr && *base ? base : "/tmp") + "/manypy-pf-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << templ;
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Pattern(size_t size, int seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i)
    out[i] = static_cast<char>((i * 131 + seed * 17 + (i >> 8)) & 0xff);
  return out;
}

std::string ValidManifestJson() {
  return R"({
  "schema_version": 1,
  "name": "resnet18",
  "version": 1,
  "platform": "manypy_python",
  "entry_point": {"kind": "pickle", "package": "model", "resource": "model.pkl"},
  "inputs":  [{"name": "INPUT__0",  "datatype": "FP32", "shape": [3, 224, 224]}],
  "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [1000]}],
  "max_batch_size": 8,
  "batching": {"dynamic": true, "preferred_batch_sizes": [4, 8], "max_queue_delay_microseconds": 500},
  "instance_count": 0,
  "device": "cpu",
  "description": "torchvision resnet18, random weights"
})";
}

std::string StorageContent(int i) { return Pattern(i == 0 ? 4096 : 100, i + 1); }

void AddValidModel(ZipBuilder* zip, const std::string& root) {
  zip->Add(root + "/manypy/manifest.json", ValidManifestJson());
  zip->Add(root + "/.data/0.storage", StorageContent(0), /*align64=*/true);
  zip->Add(root + "/.data/1.storage", StorageContent(1), /*align64=*/true);
  zip->Add(root + "/model/model.pkl", "not really a pickle");
  zip->Add(root + "/mymodel/net.py", "class Net: pass\n");
  zip->Add(root + "/.data/version", "3\n");
}

void WriteWithLibzip(const std::string& path, const std::vector<LibzipEntry>& entries) {
  int error = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  ASSERT_NE(archive, nullptr) << "zip_open(" << path << ") failed: " << error;
  for (const LibzipEntry& e : entries) {
    zip_source_t* source = zip_source_buffer(archive, e.data.data(), e.data.size(), 0);
    ASSERT_NE(source, nullptr);
    zip_int64_t index = zip_file_add(archive, e.name.c_str(), source, ZIP_FL_ENC_RAW);
    ASSERT_GE(index, 0) << zip_strerror(archive);
    ASSERT_EQ(
        0, zip_set_file_compression(archive, index, e.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0));
  }
  // zip_source_buffer does not copy: entries must live until here.
  ASSERT_EQ(0, zip_close(archive)) << zip_strerror(archive);
}

}  // namespace manypy::testing
