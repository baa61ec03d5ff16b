// FakeLoader: a ModelManager loader with no Python (after TF Serving's
// test_util/fake_loader.h): validates the archive, makes the executable the
// test asks for and remembers, weakly, what it made. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "package_format/archive.h"
#include "server/lifecycle/model_manager.h"
#include "tests/test_util/fake_executable.h"

namespace manypy::testing {

class FakeLoader {
 public:
  /// What loading a valid archive with `manifest` gives.
  using Make = std::function<StatusOr<std::shared_ptr<Executable>>(const Manifest& manifest)>;

  /// Default: a FakeExecutable multiplying by 10 x version, so that an answer
  /// tells which version computed it.
  static StatusOr<std::shared_ptr<Executable>> MakeFake(const Manifest& manifest) {
    return std::shared_ptr<Executable>(
        std::make_shared<FakeExecutable>(10.0 * static_cast<double>(manifest.version)));
  }

  explicit FakeLoader(Make make = MakeFake) : make_(std::move(make)) {}

  /// Changes what later loads give.
  void set_make(Make make) {
    std::lock_guard<std::mutex> lock(mu_);
    make_ = std::move(make);
  }

  /// For ModelManager::Options::loader; this FakeLoader must outlive the manager.
  ModelManager::Options::Loader AsLoader() {
    return [this](const std::string& path, Manifest* manifest) { return Load(path, manifest); };
  }

  /// The executable last made for name/version; expired once the manager
  /// (and every request) has let go of it, or if none was made.
  std::weak_ptr<Executable> Made(const std::string& name, int64_t version) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = made_.find({name, version});
    return it == made_.end() ? std::weak_ptr<Executable>() : it->second;
  }
  /// Load calls, valid archive or not.
  int loads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return loads_;
  }

 private:
  StatusOr<std::shared_ptr<Executable>> Load(const std::string& path, Manifest* manifest) {
    Make make;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++loads_;
      make = make_;
    }
    auto archive = PackageArchive::Open(path);
    if (!archive.ok()) return archive.status();
    *manifest = (*archive)->manifest();
    auto made = make(*manifest);
    if (made.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      made_[{manifest->name, manifest->version}] = *made;
    }
    return made;
  }

  mutable std::mutex mu_;
  Make make_;                                                                  // guarded by mu_
  std::map<std::pair<std::string, int64_t>, std::weak_ptr<Executable>> made_;  // guarded by mu_
  int loads_ = 0;                                                              // guarded by mu_
};

}  // namespace manypy::testing
