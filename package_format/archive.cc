#include "package_format/archive.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "package_format/zip_layout.h"

namespace manypy {
namespace {

constexpr uint64_t kRatioFloor = 64 << 10;  // small entries may compress well; harmless
constexpr uint64_t kMaxManifestBytes = 1 << 20;
constexpr uint64_t kStorageAlignment = 64;  // what PyTorch's writer guarantees
constexpr const char* kManifest = "manypy/manifest.json";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Why a raw entry name is unsafe, or "" if it is a plain relative path. A trailing '/' marks
// a directory entry and is allowed.
std::string NameProblem(const std::string& name) {
  if (name.empty()) return "empty name";
  if (name.find('\0') != std::string::npos) return "NUL in name";
  if (name.find('\\') != std::string::npos) return "backslash in name";
  if (name[0] == '/') return "absolute path";
  const std::string body = EndsWith(name, "/") ? name.substr(0, name.size() - 1) : name;
  for (size_t start = 0;;) {
    const size_t slash = body.find('/', start);
    const std::string part = body.substr(start, slash - start);
    if (part == "..") return "'..' component";
    if (part.empty() || part == ".") return "empty or '.' component";
    if (slash == std::string::npos) return "";
    start = slash + 1;
  }
}

bool IsStorage(const std::string& relative) {
  return relative.rfind(".data/", 0) == 0 && EndsWith(relative, ".storage") &&
         relative.size() > std::strlen(".data/.storage");
}

// Opens libzip on a private duplicate of `fd`, so libzip reads exactly the file that the
// layout reader and the mapping see, whatever happens to the path meanwhile.
zip* OpenZip(int fd, std::string* error) {
  const int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  FILE* file = dup_fd < 0 ? nullptr : fdopen(dup_fd, "rb");
  if (file == nullptr) {
    *error = std::strerror(errno);
    if (dup_fd >= 0) close(dup_fd);
    return nullptr;
  }
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* source = zip_source_filep_create(file, 0, -1, &err);
  zip* archive = nullptr;
  if (source == nullptr) {
    fclose(file);
  } else if ((archive = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &err)) ==
             nullptr) {
    zip_source_free(source);  // closes file
  }
  // libzip's own words, except where they would puzzle ("File already exists").
  if (archive == nullptr)
    *error = zip_error_code_zip(&err) == ZIP_ER_EXISTS ? "two entries have the same name"
                                                       : zip_error_strerror(&err);
  zip_error_fini(&err);
  return archive;
}

}  // namespace

PackageArchive::~PackageArchive() {
  if (zip_ != nullptr) zip_discard(zip_);
  if (fd_ >= 0) close(fd_);
}

Status PackageArchive::Error(const std::string& problem) const {
  return InvalidArgument(path_ + ": " + problem);
}

StatusOr<std::unique_ptr<PackageArchive>> PackageArchive::Open(const std::string& path,
                                                               Limits limits) {
  std::unique_ptr<PackageArchive> archive(new PackageArchive());
  archive->path_ = path;
  archive->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (archive->fd_ < 0 && errno == ENOENT) return NotFound(path + ": no such file");
  if (archive->fd_ < 0) return archive->Error(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (fstat(archive->fd_, &st) != 0 || !S_ISREG(st.st_mode))
    return archive->Error("not a regular file");
  archive->file_size_ = static_cast<uint64_t>(st.st_size);
  if (archive->file_size_ == 0) return archive->Error("empty file, not a zip archive");
  if (archive->file_size_ > limits.max_file_bytes)
    return archive->Error("the archive is " + std::to_string(archive->file_size_) +
                          " bytes, more than the limit of " + std::to_string(limits.max_file_bytes) +
                          " bytes on an archive's size");
  std::string zip_error;
  archive->zip_ = OpenZip(archive->fd_, &zip_error);
  if (archive->zip_ == nullptr) return archive->Error("not a valid zip archive: " + zip_error);
  MANYPY_RETURN_IF_ERROR(archive->Validate(limits));
  return archive;
}

Status PackageArchive::Validate(const Limits& limits) {
  const zip_int64_t count = zip_get_num_entries(zip_, 0);
  if (count <= 0) return Error("empty zip archive (no entries)");
  StatusOr<std::vector<ZipEntryLayout>> layout = ReadZipLayout(fd_, file_size_, limits.max_entries);
  if (!layout.ok()) return Error(layout.status().message());
  if (layout->size() != static_cast<uint64_t>(count))
    return Error("libzip and the layout reader disagree on the number of entries");

  for (uint64_t i = 0; i < layout->size(); ++i) {
    const ZipEntryLayout& e = (*layout)[i];
    const std::string shown = "entry '" + EscapeForMessage(e.name) + "'";
    const std::string problem = NameProblem(e.name);
    if (!problem.empty()) return Error(shown + ": unsafe name (" + problem + ")");
    const std::string top = e.name.substr(0, e.name.find('/'));
    if (e.name.size() == top.size())
      return Error(shown + " is not inside a top-level folder (every entry must be)");
    if (i == 0) root_ = top;
    if (top != root_)
      return Error(shown + " is not under the top-level folder '" + EscapeForMessage(root_) +
                   "/' of the first entry (entries must share exactly one top-level folder)");
    const std::string relative = e.name.substr(root_.size() + 1);

    zip_stat_t zs;
    const char* zip_name = zip_get_name(zip_, i, ZIP_FL_ENC_RAW);
    if (zip_name == nullptr || e.name != zip_name || zip_stat_index(zip_, i, ZIP_FL_ENC_RAW, &zs) ||
        zs.size != e.uncompressed_size || zs.comp_size != e.compressed_size ||
        zs.comp_method != e.method)
      return Error(shown + ": libzip and the layout reader disagree about it");
    if ((e.flags & 1) || zs.encryption_method != ZIP_EM_NONE)
      return Error(shown + " is encrypted; encryption is not supported");
    if (e.method != ZIP_CM_STORE && e.method != ZIP_CM_DEFLATE)
      return Error(shown + " uses compression method " + std::to_string(e.method) +
                   "; only stored and deflated entries are supported");
    if (e.method == ZIP_CM_STORE && e.compressed_size != e.uncompressed_size)
      return Error(shown + ": stored entry with different compressed and uncompressed sizes");
    if (EndsWith(e.name, "/") && e.uncompressed_size != 0)
      return Error(shown + ": directory entry with data");
    if (e.uncompressed_size > limits.max_entry_bytes)
      return Error(shown + " is " + std::to_string(e.uncompressed_size) +
                   " bytes uncompressed, more than the limit of " +
                   std::to_string(limits.max_entry_bytes));
    if (e.uncompressed_size >
        limits.max_total_bytes - std::min(total_bytes_, limits.max_total_bytes))
      return Error("entries total more than the limit of " +
                   std::to_string(limits.max_total_bytes) + " bytes uncompressed (at " + shown +
                   ")");
    total_bytes_ += e.uncompressed_size;
    if (e.method != ZIP_CM_STORE && e.uncompressed_size > kRatioFloor &&
        static_cast<double>(e.uncompressed_size) / std::max<uint64_t>(e.compressed_size, 1) >
            static_cast<double>(limits.max_compression_ratio))
      return Error(shown + " expands " + std::to_string(e.compressed_size) +
                   " compressed bytes to " + std::to_string(e.uncompressed_size) + ", more than " +
                   std::to_string(limits.max_compression_ratio) + "x (a zip bomb?)");
    if (relative.empty()) continue;  // the root folder's own directory entry
    if (!index_.emplace(relative, i).second) return Error(shown + " appears twice");
    entries_.push_back(relative);
    if (!IsStorage(relative)) continue;
    if (e.method != ZIP_CM_STORE)
      return Error("storage " + shown +
                   " is compressed; tensor storages must be stored "
                   "uncompressed so they can be mapped");
    if (e.data_offset % kStorageAlignment != 0)
      return Error("storage " + shown + " is not 64-byte aligned (its data starts at offset " +
                   std::to_string(e.data_offset) + ")");
    storages_.push_back({relative, e.data_offset, e.uncompressed_size});
  }

  auto manifest_index = index_.find(kManifest);
  if (manifest_index == index_.end()) return Error(std::string("missing ") + kManifest);
  if ((*layout)[manifest_index->second].uncompressed_size > kMaxManifestBytes)
    return Error(std::string(kManifest) + " is larger than 1 MiB");
  StatusOr<std::string> text = ReadIndex(manifest_index->second, kManifest);
  if (!text.ok()) return text.status();
  StatusOr<Manifest> manifest = ParseManifest(*text, path_);
  if (!manifest.ok()) return manifest.status();
  manifest_ = std::move(*manifest);
  return CheckEntryPoint();
}

std::string ResourceEntryName(std::string package, const std::string& resource) {
  for (char& c : package)
    if (c == '.') c = '/';
  return package + "/" + resource;
}

// The entry point must name files that are in the archive, or loading fails much later.
Status PackageArchive::CheckEntryPoint() const {
  const auto& file = ResourceEntryName;
  auto missing = [&](const std::string& field, const std::string& what) {
    return Error("manifest field '" + field + "': '" + what + "' is not in the archive");
  };
  const EntryPoint& ep = manifest_.entry_point;
  if (ep.kind == "pickle" || ep.kind == "torchscript" || ep.kind == "aoti") {
    const std::string name = file(ep.package, ep.resource);
    if (!index_.count(name)) return missing("entry_point.resource", name);
    return Status::Ok();
  }
  std::string module = file(ep.module, "");
  module.pop_back();
  if (!index_.count(module + ".py") && !index_.count(module + "/__init__.py"))
    return missing("entry_point.module", module + ".py");
  if (!ep.weights_package.empty()) {
    const std::string weights = file(ep.weights_package, ep.weights_resource);
    if (!index_.count(weights)) return missing("entry_point.weights.resource", weights);
  }
  return Status::Ok();
}

StatusOr<std::string> PackageArchive::ReadEntry(const std::string& relative_name) const {
  auto it = index_.find(relative_name);
  if (it == index_.end()) return NotFound(path_ + ": no entry '" + relative_name + "'");
  return ReadIndex(it->second, relative_name);
}

StatusOr<std::string> PackageArchive::ReadIndex(uint64_t index, const std::string& name) const {
  MutexLock lock(mu_);
  zip_stat_t st;
  if (zip_stat_index(zip_, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    return Error("entry '" + name + "': cannot stat");
  // Sizes were bounded by Open's limits; the read below never goes past the size either.
  std::string data(st.size, '\0');
  zip_file_t* file = zip_fopen_index(zip_, index, 0);
  if (file == nullptr) return Error("entry '" + name + "': " + zip_strerror(zip_));
  uint64_t done = 0;
  zip_int64_t n = 0;
  while (done < data.size() && (n = zip_fread(file, &data[done], data.size() - done)) > 0)
    done += static_cast<uint64_t>(n);
  // One more read reaches the end of the entry, where libzip checks the CRC.
  char extra;
  if (n >= 0 && done == data.size()) n = zip_fread(file, &extra, 1);
  std::string error = n < 0 ? zip_file_strerror(file) : "";
  zip_fclose(file);
  if (n != 0 || done != data.size())
    return Error("entry '" + name + "': " + (error.empty() ? "size mismatch" : error));
  return data;
}

}  // namespace manypy
