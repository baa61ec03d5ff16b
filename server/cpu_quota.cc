#include "server/cpu_quota.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace manypy {
namespace {

namespace fs = std::filesystem;

// cgroup v2 `cpu.max`: "QUOTA PERIOD", or "max PERIOD" for no limit.
double ReadCpuMax(const fs::path& file) {
  std::ifstream in(file);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  try {
    double q = std::stod(quota);
    return q > 0 ? q / period : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// cgroup v1: `cpu.cfs_quota_us` (-1: no limit) over `cpu.cfs_period_us`.
double ReadCfsQuota(const fs::path& dir) {
  std::ifstream quota_in(dir / "cpu.cfs_quota_us"), period_in(dir / "cpu.cfs_period_us");
  double quota = 0, period = 0;
  if (!(quota_in >> quota) || !(period_in >> period) || quota <= 0 || period <= 0) return 0;
  return quota / period;
}

// The cgroup path of the v2 hierarchy ("0::/path") or of v1's cpu controller
// ("N:cpu,cpuacct:/path") in /proc/self/cgroup's format; "/" when not listed.
std::string CgroupPath(const std::string& self_cgroup, bool v2) {
  std::ifstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    bool match = v2 ? controllers.empty() : false;
    std::stringstream list(controllers);
    for (std::string c; !v2 && std::getline(list, c, ',');) match = match || c == "cpu";
    if (match) return line.substr(second + 1);
  }
  return "/";
}

}  // namespace

CpuLimit DetectCpuLimit(size_t cores, const std::string& cgroup_root,
                        const std::string& self_cgroup) {
  cores = std::max<size_t>(1, cores);
  CpuLimit limit;
  limit.cpus = cores;
  std::error_code ec;
  const bool v2 = fs::exists(fs::path(cgroup_root) / "cgroup.controllers", ec);
  fs::path mount = cgroup_root;
  if (!v2) {
    for (const char* name : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
      if (fs::exists(mount / name / "cpu.cfs_quota_us", ec)) {
        mount /= name;
        break;
      }
    }
  }
  // From the process's cgroup up to the mount point; the smallest quota binds.
  fs::path relative = fs::path(CgroupPath(self_cgroup, v2)).relative_path();
  for (;;) {
    fs::path dir = relative.empty() ? mount : mount / relative;
    fs::path file = v2 ? dir / "cpu.max" : dir / "cpu.cfs_quota_us";
    double quota = v2 ? ReadCpuMax(file) : ReadCfsQuota(dir);
    if (quota > 0 && (limit.quota == 0 || quota < limit.quota)) {
      limit.quota = quota;
      limit.source = file.string();
    }
    if (relative.empty()) break;
    relative = relative.has_parent_path() ? relative.parent_path() : fs::path();
  }
  if (limit.quota > 0) {
    // 1e-9: 200000/100000 is exactly 2 but a quota like 0.3/0.1 need not be.
    size_t whole = static_cast<size_t>(std::ceil(limit.quota - 1e-9));
    limit.cpus = std::clamp<size_t>(whole, 1, cores);
  }
  return limit;
}

std::string DescribeCpuLimit(const CpuLimit& limit, size_t cores) {
  if (limit.quota == 0) return std::to_string(limit.cpus) + " CPU(s) (no cgroup CPU quota)";
  char quota[32];
  snprintf(quota, sizeof(quota), "%g", limit.quota);
  return std::to_string(limit.cpus) + " CPU(s) (cgroup quota " + quota + " CPUs, " + limit.source +
         "; " + std::to_string(cores) + " cores)";
}

}  // namespace manypy
