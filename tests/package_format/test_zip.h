// Test-only helpers that write model archives: ZipBuilder assembles zip bytes by hand (any
// name bytes, 64-byte aligned stored entries, ZIP64 form), libzip writes deflated ones.
// Plain single-threaded helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace manypy::testing {

/// Builds a zip file in memory, entry by entry, the way PyTorch's writer lays it out.
class ZipBuilder {
 public:
  /// Appends a stored entry; with `align64` its data starts on a 64-byte boundary (padding in
  /// a local "FB" extra field, as PyTorch does), with `misalign` it surely does not.
  /// Returns the absolute offset of the entry's data.
  uint64_t Add(const std::string& name, const std::string& data, bool align64 = false,
               bool misalign = false);
  /// Adds a central directory record for an entry whose local header is already in the
  /// bytes at `local_offset` (e.g. hidden inside another entry's data).
  void AddCentralOnly(const std::string& name, const std::string& data, uint64_t local_offset);
  /// The local header + data of a stored entry at offset 0, as Add would write it.
  static std::string LocalRecord(const std::string& name, const std::string& data);
  /// The finished zip: central directory and End Of Central Directory after the entries.
  /// With `zip64`, local header offsets and the EOCD use the ZIP64 forms.
  std::string Finish(bool zip64 = false) const;

 private:
  struct Central {
    std::string name;
    uint32_t crc;
    uint64_t size;
    uint64_t local_offset;
  };
  std::string bytes_;
  std::vector<Central> central_;
};

uint32_t Crc32(const std::string& data);

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& bytes);
std::string ReadFile(const std::string& path);
/// `size` bytes of a recognizable, seed-dependent pattern.
std::string Pattern(size_t size, int seed);

/// A manifest that passes every SCHEMA.md rule (pickle entry point model/model.pkl).
std::string ValidManifestJson();

/// The content of storage `i` of the standard test model.
std::string StorageContent(int i);
/// Adds the standard valid model under `root`: manifest, model/model.pkl, a module and two
/// 64-byte aligned storages .data/0.storage and .data/1.storage (StorageContent(0), (1)).
void AddValidModel(ZipBuilder* zip, const std::string& root);

/// One entry for WriteWithLibzip.
struct LibzipEntry {
  std::string name;
  std::string data;
  bool deflate = false;
};
/// Writes the entries with libzip (zip_source_buffer + zip_file_add; stored or deflated).
void WriteWithLibzip(const std::string& path, const std::vector<LibzipEntry>& entries);

}  // namespace manypy::testing
