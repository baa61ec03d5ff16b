// PackageArchive::Open: a valid archive is read with exact storage offsets; every broken
// archive is refused with the right code and a message naming the archive and the problem.
#include "package_format/archive.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

using testing::LibzipEntry;
using testing::ZipBuilder;

class ArchiveTest : public ::testing::Test {
 protected:
  // Writes `bytes` as `name` in the temp dir and returns the path.
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.File(name);
    testing::WriteFile(path, bytes);
    return path;
  }
  std::string ValidBytes(const std::string& root = "model") {
    ZipBuilder zip;
    testing::AddValidModel(&zip, root);
    return zip.Finish();
  }
  // Opens `path` expecting `code` and a message that names the archive and contains `problem`.
  void ExpectRefused(const std::string& path, const std::string& problem,
                     PackageArchive::Limits limits = {},
                     StatusCode code = StatusCode::kInvalidArgument) {
    auto archive = PackageArchive::Open(path, limits);
    ASSERT_FALSE(archive.ok()) << path << " was accepted";
    EXPECT_EQ(archive.status().code(), code) << archive.status().ToString();
    EXPECT_EQ(archive.status().message().rfind(path + ": ", 0), 0u)
        << "does not name the archive: " << archive.status().message();
    EXPECT_NE(archive.status().message().find(problem), std::string::npos)
        << "got \"" << archive.status().message() << "\", wanted \"" << problem << "\"";
  }
  // The valid model's entries (libzip form) plus `extra`.
  std::vector<LibzipEntry> ModelEntries(std::vector<LibzipEntry> extra) {
    std::vector<LibzipEntry> entries = {
        {"model/manypy/manifest.json", testing::ValidManifestJson()},
        {"model/model/model.pkl", "not really a pickle"}};
    entries.insert(entries.end(), extra.begin(), extra.end());
    return entries;
  }

  testing::TempDir dir_;
};

TEST_F(ArchiveTest, OpensAValidArchive) {
  const std::string path = Write("resnet18.mpk", ValidBytes());
  auto opened = PackageArchive::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const PackageArchive& archive = **opened;
  EXPECT_EQ(archive.path(), path);
  EXPECT_EQ(archive.root(), "model");
  EXPECT_EQ(archive.manifest().name, "resnet18");
  EXPECT_EQ(archive.entries(),
            (std::vector<std::string>{"manypy/manifest.json", ".data/0.storage", ".data/1.storage",
                                      "model/model.pkl", "mymodel/net.py", ".data/version"}));
  ASSERT_EQ(archive.storages().size(), 2u);
  const std::string file = testing::ReadFile(path);
  for (int i = 0; i < 2; ++i) {
    const StoredRecord& record = archive.storages()[i];
    EXPECT_EQ(record.name, ".data/" + std::to_string(i) + ".storage");
    EXPECT_EQ(record.data_offset % 64, 0u);
    ASSERT_EQ(record.size, testing::StorageContent(i).size());
    EXPECT_EQ(file.substr(record.data_offset, record.size), testing::StorageContent(i));
  }
  StatusOr<std::string> pickle = archive.ReadEntry("model/model.pkl");
  ASSERT_TRUE(pickle.ok()) << pickle.status().ToString();
  EXPECT_EQ(*pickle, "not really a pickle");
  EXPECT_EQ(archive.ReadEntry("model/missing.pkl").status().code(), StatusCode::kNotFound);
  EXPECT_GT(archive.total_bytes(), 4096u);
}

TEST_F(ArchiveTest, OpensZip64FormAndDeflatedEntries) {
  ZipBuilder zip;
  testing::AddValidModel(&zip, "model");
  auto zip64 = PackageArchive::Open(Write("zip64.mpk", zip.Finish(/*zip64=*/true)));
  ASSERT_TRUE(zip64.ok()) << zip64.status().ToString();
  EXPECT_EQ((*zip64)->storages().size(), 2u);

  const std::string path = dir_.File("deflated.mpk");
  testing::WriteWithLibzip(path, ModelEntries({{"model/notes.txt", std::string(1000, 'a'), true}}));
  auto deflated = PackageArchive::Open(path);
  ASSERT_TRUE(deflated.ok()) << deflated.status().ToString();
  StatusOr<std::string> notes = (*deflated)->ReadEntry("notes.txt");
  ASSERT_TRUE(notes.ok()) << notes.status().ToString();
  EXPECT_EQ(*notes, std::string(1000, 'a'));
}

TEST_F(ArchiveTest, MissingFileIsNotFound) {
  ExpectRefused(dir_.File("nope.mpk"), "no such file", {}, StatusCode::kNotFound);
}

TEST_F(ArchiveTest, RefusesFilesThatAreNotZips) {
  ExpectRefused(Write("empty.mpk", ""), "empty file");
  ExpectRefused(Write("text.mpk", "this is not a zip file at all\n"), "not a valid zip archive");
  const std::string valid = ValidBytes();
  ExpectRefused(Write("truncated.mpk", valid.substr(0, valid.size() / 2)), "not a valid zip");
  ExpectRefused(Write("cut-tail.mpk", valid.substr(0, valid.size() - 5)), "not a valid zip");
  ExpectRefused(Write("emptyzip.mpk", ZipBuilder().Finish()), "empty zip archive (no entries)");
  ExpectRefused(dir_.path(), "not a regular file");
}

TEST_F(ArchiveTest, RefusesAMissingOrBrokenManifest) {
  ZipBuilder none;
  none.Add("model/model/model.pkl", "x");
  ExpectRefused(Write("nomanifest.mpk", none.Finish()), "missing manypy/manifest.json");

  ZipBuilder bad_json;
  bad_json.Add("model/manypy/manifest.json", "{\"schema_version\": 1,");
  ExpectRefused(Write("badjson.mpk", bad_json.Finish()), "manifest is not valid JSON");

  std::string text = testing::ValidManifestJson();
  text.replace(text.find("\"FP32\""), 6, "\"FLOAT32\"");
  ZipBuilder bad_field;
  bad_field.Add("model/manypy/manifest.json", text);
  bad_field.Add("model/model/model.pkl", "x");
  ExpectRefused(Write("badfield.mpk", bad_field.Finish()),
                "manifest field 'inputs[0].datatype': unknown datatype 'FLOAT32'");

  ZipBuilder no_pickle;
  no_pickle.Add("model/manypy/manifest.json", testing::ValidManifestJson());
  ExpectRefused(Write("nopickle.mpk", no_pickle.Finish()),
                "manifest field 'entry_point.resource': 'model/model.pkl' is not in the archive");
}

TEST_F(ArchiveTest, RefusesUnsafeEntryNames) {
  const std::pair<std::string, std::string> cases[] = {
      {"model/../evil", "entry 'model/../evil': unsafe name ('..' component)"},
      {"/etc/x", "entry '/etc/x': unsafe name (absolute path)"},
      {"model\\evil", "unsafe name (backslash in name)"},
      {std::string("model/a\0b", 9), "entry 'model/a\\x00b': unsafe name (NUL in name)"},
      {"model//x", "unsafe name (empty or '.' component)"},
  };
  int n = 0;
  for (const auto& [name, problem] : cases) {
    ZipBuilder zip;
    testing::AddValidModel(&zip, "model");
    zip.Add(name, "payload");
    ExpectRefused(Write("unsafe" + std::to_string(n++) + ".mpk", zip.Finish()), problem);
  }
  // libzip writes such names as given, too.
  const std::string path = dir_.File("libzip-traversal.mpk");
  testing::WriteWithLibzip(path, ModelEntries({{"model/../../etc/passwd", "x"}}));
  ExpectRefused(path, "unsafe name ('..' component)");
}

TEST_F(ArchiveTest, RefusesEntriesOutsideOneTopLevelFolder) {
  ZipBuilder two;
  testing::AddValidModel(&two, "model");
  two.Add("other/x.py", "");
  ExpectRefused(Write("two.mpk", two.Finish()),
                "entry 'other/x.py' is not under the top-level folder 'model/'");
  ZipBuilder flat;
  testing::AddValidModel(&flat, "model");
  flat.Add("README", "");
  ExpectRefused(Write("flat.mpk", flat.Finish()),
                "entry 'README' is not inside a top-level folder");
}

TEST_F(ArchiveTest, RefusesDuplicateEntries) {
  ZipBuilder zip;
  testing::AddValidModel(&zip, "model");
  zip.Add("model/model/model.pkl", "another pickle");
  ExpectRefused(Write("dup.mpk", zip.Finish()), "two entries have the same name");
}

TEST_F(ArchiveTest, EnforcesSizeAndCountLimits) {
  const std::string path = Write("model.mpk", ValidBytes());
  PackageArchive::Limits small_entry;
  small_entry.max_entry_bytes = 1000;
  ExpectRefused(path,
                "entry 'model/.data/0.storage' is 4096 bytes uncompressed, more than the "
                "limit of 1000",
                small_entry);
  PackageArchive::Limits small_total;
  small_total.max_total_bytes = 4096;
  ExpectRefused(path, "entries total more than the limit of 4096 bytes", small_total);
  PackageArchive::Limits few;
  few.max_entries = 5;
  ExpectRefused(path, "6 entries, more than the limit of 5", few);
}

TEST_F(ArchiveTest, RefusesAnArchiveFileOverTheSizeLimitBeforeReadingIt) {
  const std::string bytes = ValidBytes();
  const std::string path = Write("model.mpk", bytes);
  PackageArchive::Limits small_file;
  small_file.max_file_bytes = 1024;
  ExpectRefused(path,
                "the archive is " + std::to_string(bytes.size()) +
                    " bytes, more than the limit of 1024 bytes",
                small_file);
  small_file.max_file_bytes = bytes.size();
  EXPECT_TRUE(PackageArchive::Open(path, small_file).ok());
}

TEST_F(ArchiveTest, RefusesAZipBomb) {
  const std::string path = dir_.File("bomb.mpk");
  testing::WriteWithLibzip(path,
                           ModelEntries({{"model/zeros.bin", std::string(10 << 20, '\0'), true}}));
  ExpectRefused(path, "entry 'model/zeros.bin' expands");
  ExpectRefused(path, "more than 100x (a zip bomb?)");
}

TEST_F(ArchiveTest, RefusesCompressedOrMisalignedStorages) {
  const std::string path = dir_.File("compressed.mpk");
  testing::WriteWithLibzip(path,
                           ModelEntries({{"model/.data/0.storage", std::string(5000, 'x'), true}}));
  ExpectRefused(path,
                "storage entry 'model/.data/0.storage' is compressed; tensor storages must "
                "be stored uncompressed");

  ZipBuilder zip;
  testing::AddValidModel(&zip, "model");
  const uint64_t offset = zip.Add("model/.data/2.storage", "abcd", false, /*misalign=*/true);
  ExpectRefused(Write("misaligned.mpk", zip.Finish()),
                "storage entry 'model/.data/2.storage' is not 64-byte aligned (its data starts at "
                "offset " +
                    std::to_string(offset) + ")");
}

// Damaged copies of a valid archive: refused or opened, never a crash or hang.
TEST_F(ArchiveTest, SurvivesCorruptedArchives) {
  const std::string valid = ValidBytes();
  const std::string path = dir_.File("corrupt.mpk");
  std::mt19937 rng(7);
  int opened = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = valid;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    testing::WriteFile(path, bad);
    auto archive = PackageArchive::Open(path);
    if (archive.ok())
      ++opened;
    else
      EXPECT_EQ(archive.status().code(), StatusCode::kInvalidArgument);
  }
  SUCCEED() << opened << " of 400 corrupted copies still opened";
}

}  // namespace
}  // namespace manypy
