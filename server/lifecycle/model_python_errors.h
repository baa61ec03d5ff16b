// What an archive's Python raised while its model loaded or ran, as the
// server's Status: the message names the model and the archive's own frames,
// the whole traceback goes to the log at verbose. Thread-safe: pure but for the log.
#pragma once

#include <string>

#include "common/status.h"
#include "interpreters/python_error.h"

namespace manypy {

/// A load's failure (PythonModel::Prepare): FAILED_PRECONDITION, with the
/// runtime's own message, for what the server's Python lacks (an extern
/// module, torch.compile's toolchain); otherwise INTERNAL with the exception
/// and the archive's frames.
Status LoadRaised(const std::string& archive_path, const PythonError& e);

/// A call's failure: INTERNAL naming the model, its exception and the
/// archive's frames, the exception's qualified type in `*error_type`. For a
/// failure on the host side (PythonError::Host), "failed" and no type.
Status ModelRaised(const std::string& model_name, const PythonError& e, std::string* error_type);

}  // namespace manypy
