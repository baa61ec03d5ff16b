#include "package_format/zip_layout.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace manypy {
namespace {

// Record signatures and fixed sizes from PKWARE's APPNOTE.TXT (4.3.7 - 4.3.16).
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kLocalSize = 30, kCentralSize = 46, kEocdSize = 22;
constexpr uint64_t kZip64EocdSize = 56, kZip64LocatorSize = 20;
constexpr uint64_t kMaxComment = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const uint8_t* p) { return Le16(p) | (static_cast<uint32_t>(Le16(p + 2)) << 16); }
uint64_t Le64(const uint8_t* p) { return Le32(p) | (static_cast<uint64_t>(Le32(p + 4)) << 32); }

// The zip being read: the bytes [base, base + size) of the file open on fd (base 0 for a
// zip file; an entry's data for a zip stored inside another).
struct Window {
  int fd;
  uint64_t base;
};

// Reads `size` bytes at `offset` of the window.
Status ReadAt(const Window& w, uint64_t offset, uint64_t size, std::string* out) {
  out->resize(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = pread(w.fd, &(*out)[done], size - done, static_cast<off_t>(w.base + offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidArgument(std::string("read failed: ") + std::strerror(errno));
    if (n == 0)
      return InvalidArgument("unexpected end of file at offset " + std::to_string(offset + done));
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

const uint8_t* Bytes(const std::string& s, uint64_t pos = 0) {
  return reinterpret_cast<const uint8_t*>(s.data()) + pos;
}

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
  uint64_t end = 0;  // where the (ZIP64) End Of Central Directory begins
};

// Finds the EOCD (its comment must reach exactly to the end of the file, so trailing bytes
// are refused), then the ZIP64 EOCD through its locator when there is one.
StatusOr<Directory> ReadDirectoryEnd(const Window& zip, uint64_t file_size) {
  if (file_size < kEocdSize) return InvalidArgument("not a zip file (too short for one)");
  const uint64_t tail_size = std::min(file_size, kEocdSize + kMaxComment);
  const uint64_t tail_start = file_size - tail_size;
  std::string tail;
  MANYPY_RETURN_IF_ERROR(ReadAt(zip, tail_start, tail_size, &tail));
  uint64_t pos = tail_size - kEocdSize;
  for (;; --pos) {
    if (Le32(Bytes(tail, pos)) == kEocdSig &&
        pos + kEocdSize + Le16(Bytes(tail, pos + 20)) == tail_size)
      break;
    if (pos == 0) return InvalidArgument("not a zip file (no End Of Central Directory record)");
  }
  const uint8_t* e = Bytes(tail, pos);
  Directory d;
  d.end = tail_start + pos;
  uint64_t disk = Le16(e + 4), cd_disk = Le16(e + 6), disk_entries = Le16(e + 8);
  d.entries = Le16(e + 10);
  d.size = Le32(e + 12);
  d.offset = Le32(e + 16);

  if (d.end >= kZip64LocatorSize) {
    std::string loc;
    MANYPY_RETURN_IF_ERROR(ReadAt(zip, d.end - kZip64LocatorSize, kZip64LocatorSize, &loc));
    if (Le32(Bytes(loc)) == kZip64LocatorSig) {
      const uint64_t z64 = Le64(Bytes(loc, 8));
      if (Le32(Bytes(loc, 4)) != 0 || Le32(Bytes(loc, 16)) > 1)
        return InvalidArgument("multi-disk zip archives are not supported");
      if (z64 > d.end - kZip64LocatorSize || d.end - kZip64LocatorSize - z64 < kZip64EocdSize)
        return InvalidArgument("ZIP64 End Of Central Directory locator points outside the file");
      std::string rec;
      MANYPY_RETURN_IF_ERROR(ReadAt(zip, z64, kZip64EocdSize, &rec));
      if (Le32(Bytes(rec)) != kZip64EocdSig)
        return InvalidArgument("ZIP64 End Of Central Directory record missing");
      disk = Le32(Bytes(rec, 16));
      cd_disk = Le32(Bytes(rec, 20));
      disk_entries = Le64(Bytes(rec, 24));
      d.entries = Le64(Bytes(rec, 32));
      d.size = Le64(Bytes(rec, 40));
      d.offset = Le64(Bytes(rec, 48));
      d.end = z64;
    }
  }
  if (disk != 0 || cd_disk != 0)
    return InvalidArgument("multi-disk zip archives are not supported");
  if (disk_entries != d.entries)
    return InvalidArgument("End Of Central Directory entry counts disagree");
  if (d.offset > d.end || d.end - d.offset != d.size)
    return InvalidArgument("central directory (offset " + std::to_string(d.offset) + ", size " +
                           std::to_string(d.size) +
                           ") does not end where the End Of Central "
                           "Directory begins (offset " +
                           std::to_string(d.end) + ")");
  if (d.entries > d.size / kCentralSize)
    return InvalidArgument("central directory too small for " + std::to_string(d.entries) +
                           " entries");
  return d;
}

// Fills the 64-bit fields that the 32-bit record marks with all-ones (APPNOTE 4.5.3).
Status ApplyZip64Extra(const uint8_t* extra, uint64_t extra_len, ZipEntryLayout* e,
                       uint32_t* disk) {
  const bool need_u = e->uncompressed_size == 0xFFFFFFFF;
  const bool need_c = e->compressed_size == 0xFFFFFFFF;
  const bool need_o = e->local_header_offset == 0xFFFFFFFF, need_d = *disk == 0xFFFF;
  if (!need_u && !need_c && !need_o && !need_d) return Status::Ok();
  for (uint64_t p = 0; p + 4 <= extra_len;) {
    const uint16_t id = Le16(extra + p), len = Le16(extra + p + 2);
    if (p + 4 + len > extra_len) break;
    if (id == kZip64ExtraId) {
      const uint64_t want = 8 * (need_u + need_c + need_o) + 4 * need_d;
      if (len < want) break;
      const uint8_t* f = extra + p + 4;
      if (need_u) e->uncompressed_size = Le64(f), f += 8;
      if (need_c) e->compressed_size = Le64(f), f += 8;
      if (need_o) e->local_header_offset = Le64(f), f += 8;
      if (need_d) *disk = Le32(f);
      return Status::Ok();
    }
    p += 4 + len;
  }
  return InvalidArgument("ZIP64 extra field missing or too short");
}

std::string EntryPrefix(uint64_t i, const std::string& name) {
  return "zip entry " + std::to_string(i) + " ('" + EscapeForMessage(name) + "'): ";
}

}  // namespace

std::string EscapeForMessage(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

StatusOr<std::vector<ZipEntryLayout>> ReadZipLayout(int fd, uint64_t file_size,
                                                    uint64_t max_entries) {
  return ReadNestedZipLayout(fd, 0, file_size, max_entries);
}

StatusOr<std::vector<ZipEntryLayout>> ReadNestedZipLayout(int fd, uint64_t base, uint64_t size,
                                                          uint64_t max_entries) {
  const Window zip{fd, base};
  StatusOr<Directory> dir_or = ReadDirectoryEnd(zip, size);
  if (!dir_or.ok()) return dir_or.status();
  const Directory dir = *dir_or;
  if (dir.entries > max_entries)
    return InvalidArgument(std::to_string(dir.entries) + " entries, more than the limit of " +
                           std::to_string(max_entries));
  std::string cd;
  MANYPY_RETURN_IF_ERROR(ReadAt(zip, dir.offset, dir.size, &cd));

  std::vector<ZipEntryLayout> entries;
  entries.reserve(dir.entries);
  uint64_t pos = 0;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    if (cd.size() - pos < kCentralSize || Le32(Bytes(cd, pos)) != kCentralSig)
      return InvalidArgument("central directory record " + std::to_string(i) + " is malformed");
    const uint8_t* r = Bytes(cd, pos);
    ZipEntryLayout e;
    e.flags = Le16(r + 8);
    e.method = Le16(r + 10);
    e.compressed_size = Le32(r + 20);
    e.uncompressed_size = Le32(r + 24);
    const uint64_t name_len = Le16(r + 28), extra_len = Le16(r + 30), comment_len = Le16(r + 32);
    uint32_t disk = Le16(r + 34);
    e.local_header_offset = Le32(r + 42);
    if (cd.size() - pos - kCentralSize < name_len + extra_len + comment_len)
      return InvalidArgument("central directory record " + std::to_string(i) + " is truncated");
    e.name.assign(cd, pos + kCentralSize, name_len);
    Status z64 = ApplyZip64Extra(r + kCentralSize + name_len, extra_len, &e, &disk);
    if (!z64.ok()) return InvalidArgument(EntryPrefix(i, e.name) + z64.message());
    if (disk != 0) return InvalidArgument(EntryPrefix(i, e.name) + "multi-disk zip archive");
    entries.push_back(std::move(e));
    pos += kCentralSize + name_len + extra_len + comment_len;
  }
  if (pos != cd.size()) return InvalidArgument("central directory has trailing bytes");

  // Each local header must lie before the central directory, name the same entry, and its
  // data must end before the central directory too.
  for (uint64_t i = 0; i < entries.size(); ++i) {
    ZipEntryLayout& e = entries[i];
    if (e.local_header_offset > dir.offset || dir.offset - e.local_header_offset < kLocalSize)
      return InvalidArgument(EntryPrefix(i, e.name) + "local header outside the data area");
    // One read for the fixed header and the name that should follow it.
    std::string local;
    const uint64_t want =
        std::min<uint64_t>(kLocalSize + e.name.size(), dir.offset - e.local_header_offset);
    MANYPY_RETURN_IF_ERROR(ReadAt(zip, e.local_header_offset, want, &local));
    const uint8_t* l = Bytes(local);
    if (Le32(l) != kLocalSig)
      return InvalidArgument(EntryPrefix(i, e.name) + "no local header at offset " +
                             std::to_string(e.local_header_offset));
    const uint64_t name_len = Le16(l + 26), extra_len = Le16(l + 28);
    e.data_offset = e.local_header_offset + kLocalSize + name_len + extra_len;
    if (e.data_offset > dir.offset || e.compressed_size > dir.offset - e.data_offset)
      return InvalidArgument(EntryPrefix(i, e.name) + "data extends past the data area");
    if (name_len != e.name.size() || local.compare(kLocalSize, name_len, e.name) != 0 ||
        Le16(l + 8) != e.method)
      return InvalidArgument(EntryPrefix(i, e.name) +
                             "local header disagrees with the central directory");
  }
  std::vector<const ZipEntryLayout*> by_offset;
  for (const ZipEntryLayout& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->local_header_offset < b->local_header_offset;
  });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const ZipEntryLayout* a = by_offset[k - 1];
    if (a->data_offset + a->compressed_size > by_offset[k]->local_header_offset)
      return InvalidArgument("zip entries '" + EscapeForMessage(a->name) + "' and '" +
                             EscapeForMessage(by_offset[k]->name) + "' overlap");
  }
  for (ZipEntryLayout& e : entries) {  // offsets in the file, not the window
    e.local_header_offset += base;
    e.data_offset += base;
  }
  return entries;
}

}  // namespace manypy
