#include "server/lifecycle/archive_traceback.h"

#include <sstream>

namespace manypy {
namespace {

constexpr const char kPackagePrefix[] = "<torch_package_";

std::string Strip(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

// "<torch_package_0>.pkg.sub.mod.py" -> "pkg/sub/mod.py"; "" if not the archive's.
std::string FileInArchive(const std::string& name) {
  if (name.rfind(kPackagePrefix, 0) != 0) return "";
  size_t dot = name.find(">.");
  if (dot == std::string::npos || name.size() < 3 || name.compare(name.size() - 3, 3, ".py") != 0) {
    return "";
  }
  std::string module = name.substr(dot + 2, name.size() - 3 - (dot + 2));
  for (char& c : module) c = c == '.' ? '/' : c;
  return module.empty() ? "" : module + ".py";
}

// A caret line under a source line (Python 3.11+): only ^, ~ and spaces.
bool Carets(const std::string& line) {
  std::string s = Strip(line);
  return !s.empty() && s.find_first_not_of("^~ ") == std::string::npos;
}

}  // namespace

std::vector<ArchiveFrame> ArchiveFrames(const std::string& traceback) {
  std::vector<std::string> lines;
  std::istringstream in(traceback);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<ArchiveFrame> frames;
  for (size_t i = 0; i < lines.size(); ++i) {
    // '  File "<torch_package_0>.helpers.py", line 12, in scale'
    std::string line = Strip(lines[i]);
    if (line.rfind("File \"", 0) != 0) continue;
    size_t quote = line.find('"', 6);
    size_t at = line.find(", line ", quote);
    size_t in_fn = line.find(", in ", at);
    if (quote == std::string::npos || at == std::string::npos || in_fn == std::string::npos) {
      continue;
    }
    std::string file = FileInArchive(line.substr(6, quote - 6));
    if (file.empty()) continue;
    ArchiveFrame frame;
    frame.file = file;
    frame.line = std::atoi(line.c_str() + at + 7);
    frame.function = line.substr(in_fn + 5);
    if (i + 1 < lines.size()) {
      std::string next = Strip(lines[i + 1]);
      if (next.rfind("File \"", 0) != 0 && !Carets(next) && lines[i + 1].rfind("    ", 0) == 0) {
        frame.source = next;
      }
    }
    frames.push_back(std::move(frame));
  }
  return {frames.rbegin(), frames.rend()};  // the traceback lists the innermost last
}

std::string DescribeArchiveFrames(const std::string& traceback, size_t max_chars) {
  std::vector<ArchiveFrame> frames = ArchiveFrames(traceback);
  if (frames.empty()) return "";
  auto where = [](const ArchiveFrame& f) {
    return f.file + ":" + std::to_string(f.line) + " in " + f.function;
  };
  std::string text = " at " + where(frames[0]);
  if (!frames[0].source.empty()) text += ": " + frames[0].source;
  for (size_t i = 1; i < frames.size() && i < 3; ++i) {
    text += (i == 1 ? " (called from " : "; ") + where(frames[i]);
    if (i + 1 == frames.size() || i == 2) text += ")";
  }
  if (text.size() > max_chars) text = text.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return text;
}

}  // namespace manypy
