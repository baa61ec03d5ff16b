#include "server/models/archive_loader.h"

#include "server/models/packaged_model.h"
#include "server/models/torchscript_model.h"

namespace manypy {

StatusOr<std::shared_ptr<Executable>> LoadArchive(InterpreterPool* pool, const std::string& path,
                                                  Manifest* manifest) {
  auto archive = PackageArchive::Open(path);
  if (!archive.ok()) return archive.status();
  *manifest = (*archive)->manifest();
  if (manifest->platform == kTorchScriptPlatform) {
    auto loaded = TorchScriptModel::Load(std::move(*archive));
    if (!loaded.ok()) return loaded.status();
    return std::shared_ptr<Executable>(std::move(*loaded));
  }
  auto loaded = PackagedModel::Open(pool, std::move(*archive));
  if (!loaded.ok()) return loaded.status();
  return std::shared_ptr<Executable>(std::move(*loaded));
}

}  // namespace manypy
