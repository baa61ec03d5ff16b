// ZipLayout: where each entry's bytes lie in a zip file (libzip has no API for it), from a
// bounds-checked read of the End Of Central Directory (ZIP64 too), central directory and local
// headers. Stateless functions over a file descriptor (pread only); safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

/// One entry as the central directory and its local header describe it.
struct ZipEntryLayout {
  std::string name;     ///< raw bytes as stored: may hold NUL or non-UTF-8 (callers decide)
  uint16_t method = 0;  ///< 0 stored, 8 deflated, ...
  uint16_t flags = 0;   ///< general purpose bit flags (bit 0: encrypted)
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  /// Absolute offset of the entry's (possibly compressed) data: local header + 30 + the local
  /// header's own name and extra lengths (which may differ from the central directory's).
  uint64_t data_offset = 0;
};

/// Reads the layout of the zip file open on `fd` (`file_size` bytes), in central directory
/// order. Refuses (INVALID_ARGUMENT, message without the file name) anything it cannot vouch
/// for: no End Of Central Directory record at the end, multi-disk, more than `max_entries` entries,
/// records or data outside the file, local headers that disagree with the central directory, and
/// entries whose data overlap (overlap is how the smallest zip bombs are built).
StatusOr<std::vector<ZipEntryLayout>> ReadZipLayout(int fd, uint64_t file_size,
                                                    uint64_t max_entries);

/// As ReadZipLayout for a zip stored inside the file open on `fd`, as the bytes [base, base +
/// size) (an uncompressed entry of another zip: an AOTInductor .pt2 in a model archive). The
/// offsets it returns are the file's (base added), so the entries' data can be read with pread.
StatusOr<std::vector<ZipEntryLayout>> ReadNestedZipLayout(int fd, uint64_t base, uint64_t size,
                                                          uint64_t max_entries);

/// `name` with control, backslash, quote and non-ASCII bytes written as \xNN, for messages.
std::string EscapeForMessage(const std::string& name);

}  // namespace manypy
