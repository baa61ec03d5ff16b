// Integration: an archive written by torch.package's own PackageExporter (Debian's
// /usr/bin/python3 with python3-torch) passes PackageArchive::Open, and its mapped storages
// hold exactly the bytes of the tensors Python saved.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "package_format/archive.h"
#include "package_format/mapped_storages.h"
#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

// Packages a tiny nn.Linear with an interned module, then prints the hex of each saved
// tensor's storage as PackageImporter reads it back.
constexpr const char* kScript = R"PY(
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from torch.package import PackageExporter, PackageImporter
import tinynet
manifest = {"schema_version": 1, "name": "tiny", "version": 1, "platform": "manypy_python",
            "entry_point": {"kind": "pickle", "package": "model", "resource": "model.pkl"},
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3]}],
            "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [2]}],
            "max_batch_size": 4}
torch.manual_seed(0)
with PackageExporter(sys.argv[2]) as exporter:
    exporter.extern(["torch", "torch.**", "numpy", "numpy.**"])
    exporter.intern("tinynet")
    exporter.save_text("manypy", "manifest.json", json.dumps(manifest))
    exporter.save_pickle("model", "model.pkl", tinynet.Net())
model = PackageImporter(sys.argv[2]).load_pickle("model", "model.pkl")
for t in model.state_dict().values():
    print(t.contiguous().numpy().tobytes().hex())
)PY";

constexpr const char* kModule = R"PY(
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x)
)PY";

std::string Hex(const at::Tensor& t) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i) out += {kDigits[p[i] >> 4], kDigits[p[i] & 15]};
  return out;
}

TEST(ArchiveTorchPackageTest, OpensAndMapsATorchPackageArchive) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("tinynet.py"), kModule);
  testing::WriteFile(dir.File("make.py"), kScript);
  const std::string archive_path = dir.File("tiny.mpk");
  const std::string command = std::string(MANYPY_SYSTEM_PYTHON) + " " + dir.File("make.py") + " " +
                              dir.path() + " " + archive_path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << command << "\n" << output;

  std::vector<std::string> python_hex;
  std::istringstream lines(output);
  // Only the script's hex lines: torch 2.6 also warns here (TypedStorage is deprecated).
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.find_first_not_of("0123456789abcdef") == std::string::npos)
      python_hex.push_back(line);
  ASSERT_EQ(python_hex.size(), 2u) << output;  // weight and bias

  auto archive = PackageArchive::Open(archive_path);
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  EXPECT_EQ((*archive)->root(), "tiny");
  EXPECT_EQ((*archive)->manifest().name, "tiny");
  const std::vector<std::string>& entries = (*archive)->entries();
  EXPECT_NE(std::find(entries.begin(), entries.end(), "tinynet.py"), entries.end());
  ASSERT_EQ((*archive)->storages().size(), 2u);
  for (const StoredRecord& record : (*archive)->storages())
    EXPECT_EQ(record.data_offset % 64, 0u) << record.name;

  auto mapped = MappedStorages::Map(**archive);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  std::vector<std::string> mapped_hex;
  for (const auto& [name, tensor] : (*mapped)->tensors()) mapped_hex.push_back(Hex(tensor));
  std::sort(python_hex.begin(), python_hex.end());
  std::sort(mapped_hex.begin(), mapped_hex.end());
  EXPECT_EQ(mapped_hex, python_hex);
}

}  // namespace
}  // namespace manypy
