#include "server/lifecycle/archive_loader.h"

#include "server/lifecycle/aoti_model.h"
#include "server/lifecycle/python_model.h"
#include "server/lifecycle/torchscript_model.h"

namespace manypy {

StatusOr<std::shared_ptr<Executable>> LoadArchive(InterpreterPool* pool, const std::string& path,
                                                  Manifest* manifest) {
  auto archive = PackageArchive::Open(path);
  if (!archive.ok()) return archive.status();
  *manifest = (*archive)->manifest();
  if (manifest->platform == kAotiPlatform) {
    // One model of its container per slot: as many calls as the server runs at once.
    auto loaded = AotiModel::Load(std::move(*archive), pool != nullptr ? pool->size() : 1);
    if (!loaded.ok()) return loaded.status();
    return std::shared_ptr<Executable>(std::move(*loaded));
  }
  if (manifest->platform == kTorchScriptPlatform) {
    auto loaded = TorchScriptModel::Load(std::move(*archive));
    if (!loaded.ok()) return loaded.status();
    return std::shared_ptr<Executable>(std::move(*loaded));
  }
  auto loaded = PythonModel::Open(pool, std::move(*archive));
  if (!loaded.ok()) return loaded.status();
  return std::shared_ptr<Executable>(std::move(*loaded));
}

}  // namespace manypy
