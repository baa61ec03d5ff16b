#include "server/lifecycle/aoti_package.h"

#include <zip.h>

#include <memory>
#include <nlohmann/json.hpp>

namespace manypy {

namespace {

// AOTIModelPackageLoader's layout (2.6): the default model's files under this
// folder, possibly below a top-level folder named after the package.
constexpr const char* kModelFolder = "data/aotinductor/model/";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatusOr<std::string> ReadEntry(zip_t* zip, zip_uint64_t index, const std::string& name,
                                const std::string& where) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    return InvalidArgument(where + ": cannot read " + name + " in the AOTInductor package");
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(zip_fopen_index(zip, index, 0),
                                                         zip_fclose);
  if (file == nullptr)
    return InvalidArgument(where + ": cannot open " + name + " in the AOTInductor package: " +
                           zip_strerror(zip));
  std::string bytes(st.size, '\0');
  zip_int64_t n = zip_fread(file.get(), bytes.data(), st.size);
  if (n < 0 || static_cast<zip_uint64_t>(n) != st.size)
    return InvalidArgument(where + ": " + name + " in the AOTInductor package is truncated");
  return bytes;
}

}  // namespace

StatusOr<AotiPackage> ReadAotiPackage(const std::string& pt2, const std::string& where) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(pt2.data(), pt2.size(), 0, &error);
  zip_t* opened = source ? zip_open_from_source(source, ZIP_RDONLY, &error) : nullptr;
  if (opened == nullptr) {
    std::string why = zip_error_strerror(&error);
    if (source) zip_source_free(source);
    zip_error_fini(&error);
    return InvalidArgument(where + ": the AOTInductor package is not a zip: " + why);
  }
  zip_error_fini(&error);
  std::unique_ptr<zip_t, void (*)(zip_t*)> zip(opened, zip_discard);
  AotiPackage package;
  std::string metadata;
  zip_int64_t entries = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    const char* raw = zip_get_name(zip.get(), static_cast<zip_uint64_t>(i), 0);
    if (raw == nullptr) continue;
    const std::string name = raw;
    size_t at = name.find(kModelFolder);
    if (at == std::string::npos) continue;
    const std::string file = name.substr(at + std::string(kModelFolder).size());
    if (file.empty() || file.find('/') != std::string::npos) continue;
    if (EndsWith(file, ".so")) {
      if (!package.so_name.empty())
        return InvalidArgument(where + ": the AOTInductor package holds two shared objects (" +
                               package.so_name + ", " + file + ")");
      auto bytes = ReadEntry(zip.get(), static_cast<zip_uint64_t>(i), name, where);
      if (!bytes.ok()) return bytes.status();
      package.so_name = file;
      package.shared_object = std::move(*bytes);
    } else if (EndsWith(file, "_metadata.json")) {
      auto bytes = ReadEntry(zip.get(), static_cast<zip_uint64_t>(i), name, where);
      if (!bytes.ok()) return bytes.status();
      metadata = std::move(*bytes);
    }
  }
  if (package.so_name.empty())
    return InvalidArgument(where + ": the AOTInductor package holds no compiled shared object "
                           "under " + kModelFolder + " (repackage it with manypy-package "
                           "create --format aoti)");
  auto json = nlohmann::json::parse(metadata, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("AOTI_DEVICE_KEY") && json["AOTI_DEVICE_KEY"].is_string())
    package.device = json["AOTI_DEVICE_KEY"].get<std::string>();
  if (package.device.empty())
    return InvalidArgument(where + ": the AOTInductor package's metadata names no device");
  return package;
}

}  // namespace manypy
