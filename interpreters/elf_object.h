// Reads the dynamic-linking facts of an ELF64 shared object and makes the one
// edit patchelf lacks (GNU_UNIQUE -> GLOBAL). Stateless functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

struct ElfDynamicInfo {
  std::string soname;                 ///< DT_SONAME, empty when absent
  std::vector<std::string> needed;    ///< DT_NEEDED in order
  std::vector<std::string> runpath;   ///< DT_RUNPATH (or DT_RPATH) entries, unexpanded
  bool has_rpath_tag = false;         ///< the search path came from DT_RPATH, not DT_RUNPATH
  bool references_python = false;     ///< some undefined dynamic symbol is Py* / _Py*
};

/// Parses `path`. Any malformed or non-ELF64 file gives an error naming it.
StatusOr<ElfDynamicInfo> ReadElfDynamicInfo(const std::string& path);

/// Rewrites every STB_GNU_UNIQUE symbol of .dynsym and .symtab to STB_GLOBAL,
/// in place, and returns how many changed. glibc keeps one instance of a
/// unique symbol per process even under RTLD_LOCAL, which would make private
/// copies of a library share (and re-initialise) its statics.
StatusOr<int> RewriteGnuUniqueToGlobal(const std::string& path);

}  // namespace manypy
