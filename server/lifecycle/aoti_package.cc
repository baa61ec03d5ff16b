#include "server/lifecycle/aoti_package.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "package_format/json_fields.h"
#include "package_format/zip_layout.h"

// The .pt2 (the zip torch._inductor.aoti_compile_and_package writes) is stored
// uncompressed in the archive (SCHEMA.md), and its entries uncompressed in it,
// so the shared object -- about the size of the weights, which it holds -- is a
// byte range of the archive's file: the loader copies it file to file rather
// than reading the .pt2 and the .so into memory (two copies of the weights at
// once: resnet50's load peaked 100+ MiB above the Python platform).
namespace manypy {

namespace {

// AOTIModelPackageLoader's layout (2.6): the default model's files under this
// folder, possibly below a top-level folder named after the package.
constexpr const char* kModelFolder = "data/aotinductor/model/";
// A .pt2 holds a few dozen entries (sources, metadata, the .so); more is not one.
constexpr uint64_t kMaxPackageEntries = 10000;
// Its _metadata.json is a few hundred bytes.
constexpr uint64_t kMaxMetadataBytes = 1 << 20;
constexpr uint16_t kStored = 0;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatusOr<std::string> ReadRange(int fd, uint64_t offset, uint64_t size, const std::string& what,
                                const std::string& where) {
  std::string bytes(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, &bytes[done], size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return InvalidArgument(where + ": cannot read " + what + " in the AOTInductor package: " +
                             (n < 0 ? std::strerror(errno) : "unexpected end of file"));
    done += static_cast<uint64_t>(n);
  }
  return bytes;
}

}  // namespace

StatusOr<AotiPackage> ReadAotiPackage(const PackageArchive& archive, const std::string& entry) {
  const std::string& where = archive.path();
  auto outer = ReadZipLayout(archive.fd(), archive.file_size(), ArchiveLimits{}.max_entries);
  if (!outer.ok()) return InvalidArgument(where + ": " + outer.status().message());
  const std::string full = archive.root() + "/" + entry;
  const ZipEntryLayout* pt2 = nullptr;
  for (const ZipEntryLayout& e : *outer)
    if (e.name == full) pt2 = &e;
  if (pt2 == nullptr) return NotFound(where + ": no entry " + entry);
  if (pt2->method != kStored)
    return InvalidArgument(where + ": " + entry + " is compressed; an AOTInductor package must "
                           "be stored uncompressed in the archive (repackage it with "
                           "manypy-package create --format aoti)");
  auto inner =
      ReadNestedZipLayout(archive.fd(), pt2->data_offset, pt2->uncompressed_size, kMaxPackageEntries);
  if (!inner.ok())
    return InvalidArgument(where + ": the AOTInductor package is not a zip: " +
                           inner.status().message());
  AotiPackage package;
  std::string metadata;
  for (const ZipEntryLayout& e : *inner) {
    size_t at = e.name.find(kModelFolder);
    if (at == std::string::npos) continue;
    const std::string file = e.name.substr(at + std::string(kModelFolder).size());
    if (file.empty() || file.find('/') != std::string::npos) continue;
    if (EndsWith(file, ".so")) {
      if (!package.so_name.empty())
        return InvalidArgument(where + ": the AOTInductor package holds two shared objects (" +
                               package.so_name + ", " + file + ")");
      if (e.method != kStored)
        return InvalidArgument(where + ": the AOTInductor package's shared object " + file +
                               " is compressed (torch._inductor.aoti_compile_and_package "
                               "stores it; repackage it with manypy-package create --format aoti)");
      package.so_name = file;
      package.so_offset = e.data_offset;
      package.so_size = e.uncompressed_size;
    } else if (EndsWith(file, "_metadata.json") && e.method == kStored &&
               e.uncompressed_size <= kMaxMetadataBytes) {
      auto bytes = ReadRange(archive.fd(), e.data_offset, e.uncompressed_size, file, where);
      if (!bytes.ok()) return bytes.status();
      metadata = std::move(*bytes);
    }
  }
  if (package.so_name.empty())
    return InvalidArgument(where + ": the AOTInductor package holds no compiled shared object "
                           "under " + kModelFolder + " (repackage it with manypy-package "
                           "create --format aoti)");
  if (!metadata.empty()) {
    auto json = JsonFields::ParseObject(metadata, where + ": the AOTInductor package's metadata");
    if (!json.ok()) return json.status();
    auto device = json->find("AOTI_DEVICE_KEY");
    if (device != json->end() && device->is_string()) package.device = device->get<std::string>();
  }
  if (package.device.empty())
    return InvalidArgument(where + ": the AOTInductor package's metadata names no device");
  return package;
}

}  // namespace manypy
