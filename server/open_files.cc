#include "server/open_files.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace manypy {
namespace {

int64_t AsCount(rlim_t value) { return value == RLIM_INFINITY ? -1 : static_cast<int64_t>(value); }

// The kernel's ceiling on any process's descriptors (setrlimit refuses more).
rlim_t NrOpen() {
  std::ifstream in("/proc/sys/fs/nr_open");
  uint64_t n = 0;
  return in >> n && n > 0 ? static_cast<rlim_t>(n) : static_cast<rlim_t>(1 << 20);
}

}  // namespace

OpenFileLimit RaiseOpenFileLimit() {
  OpenFileLimit out;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    out.error = std::string("getrlimit: ") + strerror(errno);
    return out;
  }
  out.soft_before = out.soft = AsCount(limit.rlim_cur);
  out.hard = AsCount(limit.rlim_max);
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? NrOpen() : limit.rlim_max;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    rlimit raised{target, limit.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      out.soft = static_cast<int64_t>(target);
    } else {
      out.error = std::string("setrlimit: ") + strerror(errno);
    }
  }
  return out;
}

int64_t OpenFileSoftLimit() {
  rlimit limit{};
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? AsCount(limit.rlim_cur) : -1;
}

int64_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

ConnectionLimits FitConnectionLimits(int64_t soft_limit, int64_t in_use, int http, int grpc) {
  ConnectionLimits out{http, grpc, 0, false};
  if (soft_limit < 0) {  // unlimited
    out.available = -1;
    return out;
  }
  out.available =
      std::max<int64_t>(0, soft_limit - std::max<int64_t>(0, in_use) - kReservedDescriptors);
  const int64_t wanted = int64_t{http} + grpc;
  if (wanted <= out.available) return out;
  out.clamped = true;
  // In proportion to what the flags ask, each at least one (a frontend that
  // can take no connection would only confuse).
  auto share = [&](int limit) {
    return limit == 0 ? 0 : static_cast<int>(std::max<int64_t>(1, out.available * limit / wanted));
  };
  out.http = share(http);
  out.grpc = share(grpc);
  return out;
}

std::string DescribeDescriptors(const OpenFileLimit& limit, int64_t in_use,
                                const ConnectionLimits& fitted, int http_flag, int grpc_flag) {
  auto count = [](int64_t n) { return n < 0 ? std::string("unlimited") : std::to_string(n); };
  std::string line = "descriptors: open-file limit " + count(limit.soft);
  if (limit.soft != limit.soft_before) line += " (raised from " + count(limit.soft_before) + ")";
  line += ", hard limit " + count(limit.hard);
  if (!limit.error.empty()) line += " (not raised: " + limit.error + ")";
  line += "; " + count(in_use) + " open, " + std::to_string(kReservedDescriptors) +
          " kept for the server's own files; connection limits: ";
  auto one = [](const char* flag, int value, int asked) {
    return std::to_string(value) + " (" + flag + "=" + std::to_string(asked) +
           (value != asked ? ", lowered to fit)" : ")");
  };
  if (http_flag > 0) line += "HTTP " + one("--http-max-connections", fitted.http, http_flag) + ", ";
  line += "gRPC " + one("--grpc-max-connections", fitted.grpc, grpc_flag);
  if (fitted.clamped) {
    line +=
        "; raise the hard open-file limit (ulimit -Hn, LimitNOFILE=, or the container's "
        "nofile ulimit) for more";
  }
  return line;
}

}  // namespace manypy
