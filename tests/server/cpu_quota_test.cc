// DetectCpuLimit over fake cgroup trees written to a temporary directory:
// cgroup v2 and v1 layouts, nested limits, no limit, malformed files.
#include "server/cpu_quota.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace manypy {
namespace {

namespace fs = std::filesystem;

class CpuQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("manypy-cpu-quota-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys");
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `text` to sys/RELATIVE, making its folders.
  void Write(const std::string& relative, const std::string& text) {
    fs::path file = root_ / "sys" / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  void SelfCgroup(const std::string& text) { std::ofstream(root_ / "self-cgroup") << text; }
  CpuLimit Detect(size_t cores) {
    return DetectCpuLimit(cores, (root_ / "sys").string(), (root_ / "self-cgroup").string());
  }

  fs::path root_;
};

TEST_F(CpuQuotaTest, V2ContainerQuotaAtTheRoot) {
  Write("cgroup.controllers", "cpuset cpu io memory pids\n");
  Write("cpu.max", "200000 100000\n");
  SelfCgroup("0::/\n");
  CpuLimit limit = Detect(16);
  EXPECT_EQ(limit.cpus, 2u);
  EXPECT_DOUBLE_EQ(limit.quota, 2.0);
  EXPECT_EQ(limit.source, (root_ / "sys" / "cpu.max").string());
  EXPECT_EQ(DescribeCpuLimit(limit, 16),
            "2 CPU(s) (cgroup quota 2 CPUs, " + limit.source + "; 16 cores)");
}

TEST_F(CpuQuotaTest, V2NoLimitMeansEveryCore) {
  Write("cgroup.controllers", "cpu\n");
  Write("cpu.max", "max 100000\n");
  SelfCgroup("0::/\n");
  CpuLimit limit = Detect(6);
  EXPECT_EQ(limit.cpus, 6u);
  EXPECT_EQ(limit.quota, 0);
  EXPECT_EQ(limit.source, "");
  EXPECT_EQ(DescribeCpuLimit(limit, 6), "6 CPU(s) (no cgroup CPU quota)");
}

TEST_F(CpuQuotaTest, FractionalQuotaRoundsUpAndIsAtLeastOne) {
  Write("cgroup.controllers", "cpu\n");
  SelfCgroup("0::/\n");
  Write("cpu.max", "150000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 2u);
  Write("cpu.max", "50000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 1u);
  Write("cpu.max", "300000 100000\n");
  EXPECT_EQ(Detect(8).cpus, 3u);
}

TEST_F(CpuQuotaTest, QuotaAboveTheCoresIsCappedByThem) {
  Write("cgroup.controllers", "cpu\n");
  Write("cpu.max", "800000 100000\n");
  SelfCgroup("0::/\n");
  CpuLimit limit = Detect(4);
  EXPECT_EQ(limit.cpus, 4u);
  EXPECT_DOUBLE_EQ(limit.quota, 8.0);
}

TEST_F(CpuQuotaTest, V2NestedCgroupTheSmallestLimitOnThePathWins) {
  Write("cgroup.controllers", "cpu\n");
  Write("kubepods.slice/pod1/cpu.max", "max 100000\n");
  Write("kubepods.slice/cpu.max", "300000 100000\n");
  Write("kubepods.slice/pod1/ctr/cpu.max", "400000 100000\n");
  Write("other/cpu.max", "100000 100000\n");  // not on this process's path
  SelfCgroup("0::/kubepods.slice/pod1/ctr\n");
  CpuLimit limit = Detect(16);
  EXPECT_EQ(limit.cpus, 3u);
  EXPECT_EQ(limit.source, (root_ / "sys" / "kubepods.slice" / "cpu.max").string());
}

TEST_F(CpuQuotaTest, V1QuotaOverPeriodFromTheMountedContainerCgroup) {
  // Inside a v1 container the listed host path does not exist: the
  // container's own cgroup is mounted at the controller's root.
  Write("cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  SelfCgroup("12:memory:/kubepods/pod1/abc\n4:cpu,cpuacct:/kubepods/pod1/abc\n1:name=systemd:/x\n");
  CpuLimit limit = Detect(16);
  EXPECT_EQ(limit.cpus, 3u);
  EXPECT_DOUBLE_EQ(limit.quota, 2.5);
  EXPECT_EQ(limit.source, (root_ / "sys" / "cpu,cpuacct" / "cpu.cfs_quota_us").string());
}

TEST_F(CpuQuotaTest, V1NestedPathIsRead) {
  Write("cpu/cpu.cfs_quota_us", "-1\n");
  Write("cpu/cpu.cfs_period_us", "100000\n");
  Write("cpu/docker/c1/cpu.cfs_quota_us", "100000\n");
  Write("cpu/docker/c1/cpu.cfs_period_us", "50000\n");
  SelfCgroup("3:cpuacct,cpu:/docker/c1\n");
  EXPECT_EQ(Detect(16).cpus, 2u);
}

TEST_F(CpuQuotaTest, V1UnlimitedMeansEveryCore) {
  Write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  SelfCgroup("4:cpu,cpuacct:/\n");
  CpuLimit limit = Detect(3);
  EXPECT_EQ(limit.cpus, 3u);
  EXPECT_EQ(limit.quota, 0);
}

TEST_F(CpuQuotaTest, NoCgroupFilesOrMalformedOnesAreNoLimit) {
  SelfCgroup("");
  EXPECT_EQ(Detect(5).cpus, 5u);
  EXPECT_EQ(Detect(0).cpus, 1u);  // never zero
  Write("cgroup.controllers", "cpu\n");
  Write("cpu.max", "lots 100000\n");
  EXPECT_EQ(Detect(5).quota, 0);
  Write("cpu.max", "100000 0\n");
  EXPECT_EQ(Detect(5).cpus, 5u);
}

}  // namespace
}  // namespace manypy
