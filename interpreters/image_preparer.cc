#include "interpreters/image_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "interpreters/file_cache.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

std::string Basename(const std::string& path) { return fs::path(path).filename().string(); }
std::string Dirname(const std::string& path) { return fs::path(path).parent_path().string(); }

// "libtorch_python.so.1.13" -> "libtorch_python"
std::string Stem(const std::string& name) { return name.substr(0, name.find(".so")); }

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) {
    s.replace(p, from.size(), to);
  }
  return s;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// One patchelf edit per call: patchelf 0.14 corrupts files given several.
using Edit = std::vector<std::string>;

}  // namespace

StatusOr<std::unique_ptr<ImagePreparer>> ImagePreparer::Create(Options options) {
  if (!IsFile(options.libpython)) {
    return NotFound("libpython not found at " + options.libpython +
                    " (install the libpython3.X package of tools/debian-packages.txt, or set PoolOptions::libpython)");
  }
  if (!IsFile(options.shim_library)) {
    return NotFound("interpreter shim library not found at " + options.shim_library +
                    " (build the project, or set PoolOptions::shim_library)");
  }
  MANYPY_RETURN_IF_ERROR(EnsureWritableDirectory(options.cache_dir));
  auto info = ReadElfDynamicInfo(options.libpython);
  if (!info.ok()) return info.status();
  std::unique_ptr<ImagePreparer> p(new ImagePreparer(std::move(options)));
  p->libpython_soname_ = info->soname.empty() ? Basename(p->options_.libpython) : info->soname;
  p->system_dirs_ = {Dirname(p->options_.libpython), "/lib/x86_64-linux-gnu",
                     "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  return p;
}

int ImagePreparer::NewSlot() {
  static std::atomic<int> next{0};
  return next++;
}

StatusOr<InterpreterImage> ImagePreparer::PrepareInterpreter(int slot) {
  InterpreterImage image;
  image.slot = slot;
  MutexLock lock(mu_);
  auto libpython = PrepareLibpythonLocked(slot);
  if (!libpython.ok()) return libpython.status();
  image.libpython = *libpython;
  auto shim = PrepareLocked(slot, options_.shim_library);
  if (!shim.ok()) return shim.status();
  image.shim = *shim;
  return image;
}

StatusOr<std::string> ImagePreparer::PrepareObject(int slot, const std::string& origin) {
  MutexLock lock(mu_);
  return PrepareLocked(slot, origin);
}

std::string ImagePreparer::ResolveNeeded(const std::string& needed, const ElfDynamicInfo& info,
                                         const std::string& origin) const {
  if (needed.find('/') != std::string::npos) return needed;
  std::vector<std::string> dirs;
  for (const auto& d : info.runpath) dirs.push_back(ReplaceAll(d, "$ORIGIN", Dirname(origin)));
  if (const char* env = getenv("LD_LIBRARY_PATH")) {
    std::string s = env;
    for (size_t start = 0, colon; start < s.size(); start = colon + 1) {
      colon = s.find(':', start);
      if (colon == std::string::npos) colon = s.size();
      if (colon > start) dirs.push_back(s.substr(start, colon - start));
    }
  }
  dirs.insert(dirs.end(), system_dirs_.begin(), system_dirs_.end());
  for (const auto& d : dirs) {
    std::string candidate = d + "/" + needed;
    if (IsFile(candidate)) return candidate;
  }
  return "";
}

StatusOr<bool> ImagePreparer::IsPythonDependent(const std::string& path) {
  auto it = python_dependent_.find(path);
  if (it != python_dependent_.end()) return it->second;
  auto info = ReadElfDynamicInfo(path);
  if (!info.ok()) return info.status();
  bool dependent = info->references_python;
  python_dependent_[path] = dependent;
  return dependent;
}

StatusOr<std::string> ImagePreparer::PrepareLibpythonLocked(int slot) {
  auto key = std::make_pair(slot, options_.libpython);
  if (auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  auto content = HashFileContent(options_.libpython);
  if (!content.ok()) return content.status();
  std::string name = Stem(libpython_soname_) + "-manypy" + std::to_string(slot) + ".so";
  std::string dir = options_.cache_dir + "/" + HexDigest(HashCombine(*content, name));
  MANYPY_RETURN_IF_ERROR(EnsureWritableDirectory(dir));
  std::string out = dir + "/" + name;
  MANYPY_RETURN_IF_ERROR(MaterializeAtomically(out, [&](const std::string& tmp) {
    MANYPY_RETURN_IF_ERROR(CopyFile(options_.libpython, tmp));
    // A fresh inode at a unique path with a unique soname: the dynamic linker
    // then treats it as a separate object, i.e. a separate CPython runtime.
    return RunProgram(options_.patchelf, {"--set-soname", name, tmp});
  }));
  prepared_[key] = out;
  return out;
}

StatusOr<std::string> ImagePreparer::PrepareLocked(int slot, const std::string& origin) {
  auto key = std::make_pair(slot, origin);
  if (auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  auto info = ReadElfDynamicInfo(origin);
  if (!info.ok()) return info.status();
  auto libpython = PrepareLibpythonLocked(slot);
  if (!libpython.ok()) return libpython.status();

  std::vector<Edit> edits;
  bool links_libpython = false;
  for (const auto& needed : info->needed) {
    if (needed == libpython_soname_) {
      edits.push_back({"--replace-needed", needed, *libpython});
      links_libpython = true;
      continue;
    }
    std::string resolved = ResolveNeeded(needed, *info, origin);
    if (resolved.empty()) continue;  // the dynamic linker reports it at load time
    auto dependent = IsPythonDependent(resolved);
    if (!dependent.ok()) return dependent.status();
    if (!*dependent) continue;
    auto copy = PrepareLocked(slot, resolved);
    if (!copy.ok()) return copy.status();
    edits.push_back({"--replace-needed", needed, *copy});
  }
  // Debian's extension modules do not link libpython: their Py* references
  // must resolve inside this interpreter's private dependency tree.
  if (info->references_python && !links_libpython) edits.push_back({"--add-needed", *libpython});
  std::string name = Basename(origin);
  if (!info->soname.empty()) {
    name = Stem(info->soname) + "-manypy" + std::to_string(slot) + ".so";
    edits.push_back({"--set-soname", name});
  }
  bool has_origin = false;
  std::string search_path;
  for (const auto& d : info->runpath) {
    has_origin |= d.find("$ORIGIN") != std::string::npos;
    search_path += (search_path.empty() ? "" : ":") + ReplaceAll(d, "$ORIGIN", Dirname(origin));
  }
  // The copy lives elsewhere, so $ORIGIN must keep meaning the original directory.
  if (has_origin) {
    edits.push_back(info->has_rpath_tag ? Edit{"--force-rpath", "--set-rpath", search_path}
                                        : Edit{"--set-rpath", search_path});
  }

  auto content = HashFileContent(origin);
  if (!content.ok()) return content.status();
  uint64_t recipe = HashCombine(*content, name);
  for (const auto& e : edits) {
    for (const auto& a : e) recipe = HashCombine(recipe, a);
  }
  std::string dir = options_.cache_dir + "/" + HexDigest(recipe);
  MANYPY_RETURN_IF_ERROR(EnsureWritableDirectory(dir));
  std::string out = dir + "/" + name;
  MANYPY_RETURN_IF_ERROR(MaterializeAtomically(out, [&](const std::string& tmp) {
    MANYPY_RETURN_IF_ERROR(CopyFile(origin, tmp));
    for (Edit e : edits) {
      e.push_back(tmp);
      MANYPY_RETURN_IF_ERROR(RunProgram(options_.patchelf, e));
    }
    auto changed = RewriteGnuUniqueToGlobal(tmp);
    return changed.ok() ? Status::Ok() : changed.status();
  }));
  prepared_[key] = out;
  return out;
}

}  // namespace manypy
