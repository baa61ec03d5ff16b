// Small archives for tests of the model lifecycle with fake models: a manifest
// with one FP32 input and output of width 2, and a minimal valid archive for
// it (manifest and an entry-point pickle that only FakeLoader reads). Not
// thread-safe (files of one temporary directory).
#pragma once

#include <string>

#include "package_format/manifest.h"
#include "tests/package_format/test_zip.h"

namespace manypy::testing {

/// `name` version `version`: IN and OUT FP32 [2], a batch dimension of up to 8.
inline Manifest TestManifest(const std::string& name, int64_t version) {
  Manifest m;
  m.name = name;
  m.version = version;
  m.max_batch_size = 8;
  m.inputs = {{"IN", "FP32", {2}}};
  m.outputs = {{"OUT", "FP32", {2}}};
  return m;
}

/// Writes `file` in `dir` as an archive with manifest `m`; returns its path.
inline std::string WriteTestArchive(TempDir& dir, const std::string& file, const Manifest& m) {
  ZipBuilder zip;
  zip.Add(m.name + "/manypy/manifest.json", ManifestToJson(m));
  zip.Add(m.name + "/model/model.pkl", "not really a pickle");
  WriteFile(dir.File(file), zip.Finish());
  return dir.File(file);
}

}  // namespace manypy::testing
