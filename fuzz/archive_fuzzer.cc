// Fuzzes archive validation: the input is a whole archive file, read by the zip layout
// reader and by PackageArchive::Open (libzip, names, limits, storages, manifest, entry
// point) from an in-memory file. An archive Open accepts must read back every entry, and
// its storages must lie inside the file, 64-byte aligned.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "package_format/archive.h"
#include "package_format/zip_layout.h"

namespace {

// An anonymous in-memory file holding `data`, or -1.
int MemoryFile(const uint8_t* data, size_t size) {
  int fd = memfd_create("archive_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return -1;
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace manypy;
  int fd = MemoryFile(data, size);
  FUZZ_CHECK(fd >= 0, "memfd_create/write failed");
  auto layout = ReadZipLayout(fd, size, ArchiveLimits().max_entries);
  if (!layout.ok()) {
    FUZZ_CHECK(layout.status().code() == StatusCode::kInvalidArgument, "%s",
               layout.status().ToString().c_str());
  }
  // Open takes a path: this process's view of the same file.
  auto archive = PackageArchive::Open("/proc/self/fd/" + std::to_string(fd));
  close(fd);
  if (!archive.ok()) {
    FUZZ_CHECK(archive.status().code() == StatusCode::kInvalidArgument, "%s",
               archive.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(layout.ok(), "Open accepted what the layout reader refused");
  for (const StoredRecord& r : (*archive)->storages()) {
    FUZZ_CHECK(r.data_offset % 64 == 0 && r.data_offset <= size && r.size <= size - r.data_offset,
               "storage %s at [%llu, +%llu) of a %zu-byte file", r.name.c_str(),
               static_cast<unsigned long long>(r.data_offset),
               static_cast<unsigned long long>(r.size), size);
  }
  for (const std::string& name : (*archive)->entries()) {
    auto read = (*archive)->ReadEntry(name);
    // A CRC mismatch is the one thing Open does not check up front.
    FUZZ_CHECK(read.ok() || read.status().code() == StatusCode::kInvalidArgument, "%s",
               read.status().ToString().c_str());
  }
  return 0;
}
