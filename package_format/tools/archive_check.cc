// manypy-archive-check ARCHIVE...: runs the server's own archive validation
// (PackageArchive::Open) on each archive; `manypy-package validate` calls it so that the
// packaging tool's verdict is literally the server's.
#include <cstdio>
#include <string>

#include "package_format/archive.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s ARCHIVE...\n"
                 "Validates manypy model archives as the server does; exits 1 if any is invalid.\n",
                 argv[0]);
    return 2;
  }
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    auto archive = manypy::PackageArchive::Open(argv[i]);
    if (!archive.ok()) {
      std::fprintf(stderr, "%s\n", archive.status().ToString().c_str());
      ++failures;
      continue;
    }
    const manypy::PackageArchive& a = **archive;
    std::printf("%s: OK name=%s version=%lld entries=%zu storages=%zu total_bytes=%llu\n",
                a.path().c_str(), a.manifest().name.c_str(),
                static_cast<long long>(a.manifest().version), a.entries().size(),
                a.storages().size(), static_cast<unsigned long long>(a.total_bytes()));
  }
  return failures == 0 ? 0 : 1;
}
