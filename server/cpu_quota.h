// CPU limit: how many CPUs this process may use, from its affinity mask and
// its cgroup's CPU quota (a container's CPU limit). Pure functions over files;
// thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace manypy {

struct CpuLimit {
  /// Whole CPUs: min(cores, quota rounded up), at least 1. A fractional CPU
  /// still runs a request (the kernel throttles it), so 1.5 CPUs give 2.
  size_t cpus = 1;
  /// The smallest cgroup quota on the path to the root, in CPUs; 0: none.
  double quota = 0;
  /// The file the quota came from; empty: none.
  std::string source;
};

/// Reads the CPU quota of the cgroup listed in `self_cgroup` (in
/// /proc/self/cgroup's format) under `cgroup_root`: cgroup v2's `cpu.max`
/// ("QUOTA PERIOD" or "max PERIOD"), else v1's `cpu.cfs_quota_us` /
/// `cpu.cfs_period_us` in the cpu controller's hierarchy. Walks from the
/// process's cgroup up to the root, since a parent's limit binds its children
/// (inside a container the listed path may not exist: the container's own
/// cgroup is mounted at the root). `cores`: the CPUs the affinity mask allows.
CpuLimit DetectCpuLimit(size_t cores, const std::string& cgroup_root = "/sys/fs/cgroup",
                        const std::string& self_cgroup = "/proc/self/cgroup");

/// One line for the log: "2 CPU(s) (cgroup quota 1.5 CPUs, FILE; 16 cores)".
std::string DescribeCpuLimit(const CpuLimit& limit, size_t cores);

}  // namespace manypy
