// Where in a model archive's own code a Python exception came from: the
// frames of its traceback that belong to the archive's modules (torch.package
// names their files "<torch_package_N>.module.py"), innermost first, as files
// inside the archive. Pure functions of the traceback text; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace manypy {

struct ArchiveFrame {
  std::string file;      ///< inside the archive: "helpers.py", "pkg/sub/mod.py"
  int line = 0;
  std::string function;  ///< "<module>" for module-level code
  std::string source;    ///< that line of source, stripped; may be empty
};

/// The archive's frames of `traceback` (Python's "Traceback (most recent call
/// last): ..." text), innermost first; empty when none is the archive's.
std::vector<ArchiveFrame> ArchiveFrames(const std::string& traceback);

/// For a message: " at helpers.py:12 in scale: raise ValueError(...) (called
/// from model.py:30 in forward)", the innermost frame with its source and up
/// to two callers; at most `max_chars` (cut with "..."); "" when no frame is
/// the archive's.
std::string DescribeArchiveFrames(const std::string& traceback, size_t max_chars = 600);

}  // namespace manypy
