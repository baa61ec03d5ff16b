#include "server/flag_reader.h"

#include <fstream>
#include <stdexcept>

namespace manypy {
namespace {

bool TakesNoValue(const std::string& arg) {
  for (const char* flag : {"--help", "--version", "--no-metrics", "--no-http", "--tracing",
                           "--no-supervisor", "--clear-quarantine", "--allow-client-shm",
                           "--allow-client-shm-remote"}) {
    if (arg == flag) return true;
  }
  return false;
}

// A config file may name another (`config=FILE`), to this depth: a file that
// names itself is refused, not recursed into until the stack runs out.
constexpr int kMaxConfigNesting = 8;

Status Deliver(const std::string& flag, const std::string& value, const FlagSink& sink, int nesting);

Status ReadConfigFile(const std::string& path, const FlagSink& sink, int nesting) {
  if (nesting > kMaxConfigNesting) {
    return InvalidArgument("config file " + path + ": config files nested deeper than the limit of " +
                           std::to_string(kMaxConfigNesting) + " (does one name itself?)");
  }
  std::ifstream in(path);
  if (!in) return NotFound("cannot read config file " + path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(path + ":" + std::to_string(n) + ": expected flag=value");
    }
    MANYPY_RETURN_IF_ERROR(Deliver(line.substr(0, eq), line.substr(eq + 1), sink, nesting));
  }
  return Status::Ok();
}

Status Deliver(const std::string& flag, const std::string& value, const FlagSink& sink, int nesting) {
  return flag == "config" ? ReadConfigFile(value, sink, nesting + 1) : sink(flag, value);
}

}  // namespace

Status ReadFlags(int argc, char** argv, const FlagSink& sink) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || TakesNoValue(arg)) {
      MANYPY_RETURN_IF_ERROR(sink(arg == "-h" ? "help" : arg.substr(2), "true"));
      continue;
    }
    if (arg.rfind("--", 0) != 0) return InvalidArgument("unexpected argument '" + arg + "' (see --help)");
    std::string flag = arg.substr(2), value;
    size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return InvalidArgument("--" + flag + " needs a value");
    }
    MANYPY_RETURN_IF_ERROR(Deliver(flag, value, sink, 0));
  }
  return Status::Ok();
}

Status ParseIntFlag(const std::string& flag, const std::string& value, long min, long max,
                    long* out) {
  try {
    size_t used = 0;
    long v = std::stol(value, &used);
    if (used != value.size() || v < min || v > max) throw std::out_of_range(value);
    *out = v;
    return Status::Ok();
  } catch (const std::exception&) {
    return InvalidArgument("--" + flag + " needs an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got '" + value + "'");
  }
}

Status ParseBoolFlag(const std::string& flag, const std::string& value, bool* out) {
  if (value != "true" && value != "false") {
    return InvalidArgument("--" + flag + " is true or false, got '" + value + "'");
  }
  *out = value == "true";
  return Status::Ok();
}

}  // namespace manypy
