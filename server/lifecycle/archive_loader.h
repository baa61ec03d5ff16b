// LoadArchive: opens a model archive and loads it on the platform its manifest
// names -- Python in the interpreter pool (PythonModel), a TorchScript module
// (TorchScriptModel) or an AOTInductor package (AotiModel) run from C++. The
// model manager's default loader.
// A Python model is loaded in no interpreter yet: the manager prepares each
// slot in turn (Executable::Prepare) while the others serve.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "interpreters/pool.h"
#include "package_format/manifest.h"
#include "server/inference/executable.h"

namespace manypy {

/// The opened model, with its manifest in `*manifest`. Errors are the
/// archive's or the platform loader's (see PythonModel::Open, TorchScriptModel
/// and AotiModel).
StatusOr<std::shared_ptr<Executable>> LoadArchive(InterpreterPool* pool, const std::string& path,
                                                  Manifest* manifest);

}  // namespace manypy
