// ParseManifest / ManifestToJson: the valid example round-trips, and each SCHEMA.md rule,
// broken once, gives an INVALID_ARGUMENT naming the archive and the field.
#include "package_format/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "tests/package_format/test_zip.h"

namespace manypy {
namespace {

using json = nlohmann::json;

json Valid() { return json::parse(testing::ValidManifestJson()); }

TEST(ManifestTest, ParsesTheSchemaExample) {
  StatusOr<Manifest> m = ParseManifest(testing::ValidManifestJson(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, 1);
  EXPECT_EQ(m->name, "resnet18");
  EXPECT_EQ(m->version, 1);
  EXPECT_EQ(m->platform, "manypy_python");
  EXPECT_EQ(m->entry_point.kind, "pickle");
  EXPECT_EQ(m->entry_point.package, "model");
  EXPECT_EQ(m->entry_point.resource, "model.pkl");
  EXPECT_EQ(m->method, "forward");
  ASSERT_EQ(m->inputs.size(), 1u);
  EXPECT_EQ(m->inputs[0].name, "INPUT__0");
  EXPECT_EQ(m->inputs[0].datatype, "FP32");
  EXPECT_EQ(m->inputs[0].shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(m->outputs[0].shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(m->max_batch_size, 8);
  EXPECT_TRUE(m->batching.dynamic);
  EXPECT_EQ(m->batching.preferred_batch_sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(m->batching.max_queue_delay_microseconds, 500);
  EXPECT_EQ(m->instance_count, 0);
  EXPECT_EQ(m->device, "cpu");
  EXPECT_EQ(m->description, "torchvision resnet18, random weights");
}

TEST(ManifestTest, RoundTripsThroughJson) {
  StatusOr<Manifest> m = ParseManifest(testing::ValidManifestJson(), "model.mpk");
  ASSERT_TRUE(m.ok());
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << ManifestToJson(*m);
  EXPECT_EQ(*again, *m);
}

TEST(ManifestTest, SequenceBatchingTakesItsDefaultsAndRoundTrips) {
  json j = Valid();
  j["batching"]["dynamic"] = false;
  j["sequence_batching"] = json::object();
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->sequence_batching.enabled);
  EXPECT_EQ(m->sequence_batching.max_sequence_idle_microseconds, 1000000);
  EXPECT_EQ(m->sequence_batching.max_concurrent_sequences, 256);
  j["sequence_batching"] = {{"max_sequence_idle_microseconds", 5}, {"max_concurrent_sequences", 2}};
  m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->sequence_batching.max_sequence_idle_microseconds, 5);
  EXPECT_EQ(m->sequence_batching.max_concurrent_sequences, 2);
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *m);
  // Without it, none, and the writer leaves it out.
  StatusOr<Manifest> plain = ParseManifest(testing::ValidManifestJson(), "model.mpk");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->sequence_batching.enabled);
  EXPECT_EQ(ManifestToJson(*plain).find("sequence_batching"), std::string::npos);
}

json Version2(json packaged) {
  json j = Valid();
  j["schema_version"] = 2;
  j["packaged_with"] = std::move(packaged);
  return j;
}

TEST(ManifestTest, Version2RecordsWhatTheArchiveWasPackagedWith) {
  json j = Version2({{"torch", "2.6.0+debian"}, {"python", "3.13.5"}, {"manypy", "0.1.0"}});
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, 2);
  EXPECT_EQ(m->packaged_with.torch, "2.6.0+debian");
  EXPECT_EQ(m->packaged_with.python, "3.13.5");
  EXPECT_EQ(m->packaged_with.manypy, "0.1.0");
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *m);
  for (const char* key : {"torch", "python", "manypy"}) {
    json missing = j;
    missing["packaged_with"].erase(key);
    StatusOr<Manifest> bad = ParseManifest(missing.dump(), "model.mpk");
    EXPECT_NE(bad.status().message().find(std::string("'packaged_with.") + key +
                                          "': required field missing"),
              std::string::npos)
        << bad.status().ToString();
    json wrong = j;
    wrong["packaged_with"][key] = "latest";
    bad = ParseManifest(wrong.dump(), "model.mpk");
    EXPECT_NE(bad.status().message().find("'latest' is not a version"), std::string::npos)
        << bad.status().ToString();
  }
  json extra = j;
  extra["packaged_with"]["cuda"] = "12.4";
  EXPECT_NE(ParseManifest(extra.dump(), "model.mpk").status().message().find(
                "'packaged_with.cuda': unknown field"),
            std::string::npos);
}

TEST(ManifestTest, AnArchiveFromANewerTorchIsRefusedNamingBothVersions) {
  auto manifest = [](const char* torch) {
    return ParseManifest(
               Version2({{"torch", torch}, {"python", "3.13.5"}, {"manypy", "0.1.0"}}).dump(),
               "m.mpk")
        .value();
  };
  // Packaged under 2.6, served by 1.13: refused, both versions named.
  Status s = CheckPackagedTorch(manifest("2.6.0+debian"), "1.13.1", "m.mpk");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("m.mpk: packaged with PyTorch 2.6.0+debian (Python 3.13.5"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("this server runs PyTorch 1.13.1"), std::string::npos) << s.message();
  // Packaged under 1.13, served by 2.6; the same minor with another patch or tag; the same.
  EXPECT_TRUE(CheckPackagedTorch(manifest("1.13.1"), "2.6.0+debian", "m.mpk").ok());
  EXPECT_TRUE(CheckPackagedTorch(manifest("2.6.0"), "2.6.1+debian", "m.mpk").ok());
  EXPECT_TRUE(CheckPackagedTorch(manifest("2.6.3"), "2.6.0", "m.mpk").ok());
  EXPECT_FALSE(CheckPackagedTorch(manifest("2.10.0"), "2.6.0", "m.mpk").ok());
  // A version 1 archive records nothing and loads anywhere.
  StatusOr<Manifest> v1 = ParseManifest(testing::ValidManifestJson(), "m.mpk");
  ASSERT_TRUE(v1.ok());
  EXPECT_TRUE(CheckPackagedTorch(*v1, "1.13.1", "m.mpk").ok());
}

TEST(ManifestTest, FactoryEntryPointRoundTrips) {
  json j = Valid();
  j["entry_point"] = {{"kind", "factory"},
                      {"module", "mymodel.net"},
                      {"function", "build"},
                      {"weights", {{"package", "manypy"}, {"resource", "weights.pkl"}}}};
  j["device"] = "cuda:1";
  j["method"] = "predict";
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->entry_point.module, "mymodel.net");
  EXPECT_EQ(m->entry_point.function, "build");
  EXPECT_EQ(m->entry_point.weights_package, "manypy");
  EXPECT_EQ(m->entry_point.weights_resource, "weights.pkl");
  EXPECT_EQ(m->entry_point.package, "");
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *m);
}

TEST(ManifestTest, TorchScriptPlatformTakesItsOwnEntryPoint) {
  json j = Valid();
  j["platform"] = "torchscript";
  j["entry_point"] = {{"kind", "torchscript"}};
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->platform, kTorchScriptPlatform);
  EXPECT_EQ(m->entry_point.package, "model");
  EXPECT_EQ(m->entry_point.resource, "model.pt");  // the kind's default, not pickle's
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *m);

  j["entry_point"] = {{"kind", "pickle"}};  // a pickle is not a TorchScript module
  m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'entry_point.kind': kind 'pickle' does not go with "
                                      "platform 'torchscript'"),
            std::string::npos)
      << m.status().message();
  j = Valid();
  j["entry_point"] = {{"kind", "torchscript"}};  // nor runs Python one
  m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("does not go with platform 'manypy_python'"),
            std::string::npos)
      << m.status().message();
}

TEST(ManifestTest, AotiPlatformTakesItsOwnEntryPoint) {
  json j = Valid();
  j["platform"] = "torch_aoti";
  j["entry_point"] = {{"kind", "aoti"}};
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->platform, kAotiPlatform);
  EXPECT_EQ(m->entry_point.package, "model");
  EXPECT_EQ(m->entry_point.resource, "model.pt2");  // the kind's default
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "model.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *m);
  for (const char* kind : {"pickle", "torchscript"}) {  // neither is a compiled package
    j["entry_point"] = {{"kind", kind}};
    m = ParseManifest(j.dump(), "model.mpk");
    ASSERT_FALSE(m.ok()) << kind;
    EXPECT_NE(m.status().message().find("does not go with platform 'torch_aoti'"),
              std::string::npos)
        << m.status().message();
  }
  j = Valid();
  j["entry_point"] = {{"kind", "aoti"}};  // nor runs Python one
  m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("kind 'aoti' does not go with platform 'manypy_python'"),
            std::string::npos)
      << m.status().message();
}

TEST(ManifestTest, ACompiledPackageRunsOnlyUnderTheReleaseItWasCompiledWith) {
  auto manifest = [](const char* torch) {
    json j = Version2({{"torch", torch}, {"python", "3.13.5"}, {"manypy", "0.1.0"}});
    j["platform"] = "torch_aoti";
    j["entry_point"] = {{"kind", "aoti"}};
    return ParseManifest(j.dump(), "m.mpk").value();
  };
  EXPECT_TRUE(CheckCompiledTorch(manifest("2.6.0+debian"), "2.6.0", "m.mpk").ok());
  EXPECT_TRUE(CheckCompiledTorch(manifest("2.6.0"), "2.6.0+debian", "m.mpk").ok());
  for (const char* server : {"2.6.1", "2.7.0", "1.13.1"}) {
    Status s = CheckCompiledTorch(manifest("2.6.0+debian"), server, "m.mpk");
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << server;
    EXPECT_NE(s.message().find("m.mpk: compiled by AOTInductor under PyTorch 2.6.0+debian, but "
                               "this server runs PyTorch " + std::string(server)),
              std::string::npos)
        << s.message();
  }
  // A version 1 manifest records no version: nothing says the package fits.
  json v1 = json::parse(testing::ValidManifestJson());
  v1["platform"] = "torch_aoti";
  v1["entry_point"] = {{"kind", "aoti"}};
  StatusOr<Manifest> old = ParseManifest(v1.dump(), "m.mpk");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(CheckCompiledTorch(*old, "2.6.0", "m.mpk").code(), StatusCode::kFailedPrecondition);
}

TEST(ManifestTest, OptionalFieldsTakeTheirDefaults) {
  json j = Valid();
  for (const char* key : {"max_batch_size", "batching", "instance_count", "device", "description"})
    j.erase(key);
  j["entry_point"] = {{"kind", "pickle"}};
  j["inputs"][0]["shape"] = json::array();  // a scalar
  StatusOr<Manifest> m = ParseManifest(j.dump(), "model.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->entry_point.package, "model");
  EXPECT_EQ(m->entry_point.resource, "model.pkl");
  EXPECT_EQ(m->max_batch_size, 0);
  EXPECT_FALSE(m->batching.dynamic);
  EXPECT_EQ(m->device, "cpu");
  EXPECT_EQ(m->method, "forward");
  EXPECT_TRUE(m->inputs[0].shape.empty());
}

TEST(ManifestTest, DatatypeHelpers) {
  for (const char* t : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                        "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES"})
    EXPECT_TRUE(IsValidDatatype(t)) << t;
  EXPECT_FALSE(IsValidDatatype("FLOAT32"));
  EXPECT_FALSE(IsValidDatatype("fp32"));
  EXPECT_EQ(DatatypeByteSize("BOOL"), 1);
  EXPECT_EQ(DatatypeByteSize("BF16"), 2);
  EXPECT_EQ(DatatypeByteSize("FP32"), 4);
  EXPECT_EQ(DatatypeByteSize("UINT64"), 8);
  EXPECT_EQ(DatatypeByteSize("BYTES"), -1);
  EXPECT_EQ(DatatypeByteSize("nope"), -1);
}

struct BadCase {
  const char* what;
  std::function<void(json&)> change;
  const char* message;  // expected after "model.mpk: "
};

void ExpectRejected(const std::string& text, const std::string& message, const char* what) {
  StatusOr<Manifest> m = ParseManifest(text, "model.mpk");
  ASSERT_FALSE(m.ok()) << what << " was accepted";
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << what;
  EXPECT_EQ(m.status().message().rfind("model.mpk: ", 0), 0u) << m.status().message();
  EXPECT_NE(m.status().message().find(message), std::string::npos)
      << what << ": got \"" << m.status().message() << "\", wanted \"" << message << "\"";
}

TEST(ManifestTest, RejectsTextThatIsNotAJsonObject) {
  ExpectRejected("{\"schema_version\": 1,", "manifest is not valid JSON", "truncated JSON");
  ExpectRejected("", "manifest is not valid JSON", "empty text");
  ExpectRejected("[1, 2]", "manifest must be a JSON object, not a list", "a list");
  ExpectRejected("{\"name\": \"\xff\"}", "manifest is not valid JSON", "invalid UTF-8");
  ExpectRejected(R"({"schema_version": 1, "name": "a", "name": "b"})",
                 "manifest has the key 'name' twice", "duplicate key");
  // A million levels, in a value and at the top: refused where level 101 opens.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  ExpectRejected(R"({"schema_version": 1, "name": )" + deep + "}",
                 "manifest is not valid JSON: nested deeper than the limit of 100 levels",
                 "a million levels in a field");
  ExpectRejected(deep, "nested deeper than the limit of 100 levels", "a million levels");
}

TEST(ManifestTest, RejectsEveryRuleBrokenOnce) {
  auto set = [](const char* key, json value) { return [=](json& j) { j[key] = value; }; };
  auto erase = [](const char* key) { return [=](json& j) { j.erase(key); }; };
  const std::vector<BadCase> cases = {
      {"no schema_version", erase("schema_version"),
       "manifest field 'schema_version': required field missing"},
      {"schema_version 3", set("schema_version", 3),
       "manifest field 'schema_version': unsupported schema version 3 (this reader knows 1 to 2)"},
      {"schema_version 2 without packaged_with", set("schema_version", 2),
       "manifest field 'packaged_with': required field missing"},
      {"packaged_with in version 1",
       set("packaged_with", json{{"torch", "2.6.0"}, {"python", "3.13.5"}, {"manypy", "0.1.0"}}),
       "manifest field 'packaged_with': unknown field"},
      {"schema_version string", set("schema_version", "1"),
       "manifest field 'schema_version': expected an integer, got a string"},
      {"schema_version float", set("schema_version", 1.0),
       "manifest field 'schema_version': expected an integer, got a number"},
      {"unknown field", set("nmae", "x"), "manifest field 'nmae': unknown field (expected one of"},
      {"no name", erase("name"), "manifest field 'name': required field missing"},
      {"empty name", set("name", ""), "manifest field 'name': '' is not 1-128 characters"},
      {"name with space", set("name", "res net"), "manifest field 'name': 'res net' is not"},
      {"name starting with dot", set("name", ".hidden"), "not starting with '.'"},
      {"long name", set("name", std::string(129, 'a')), "manifest field 'name':"},
      {"no version", erase("version"), "manifest field 'version': required field missing"},
      {"version 0", set("version", 0), "manifest field 'version': must be >= 1, got 0"},
      {"version too big", set("version", UINT64_MAX),
       "manifest field 'version': integer out of range"},
      {"no platform", erase("platform"), "manifest field 'platform': required field missing"},
      {"wrong platform", set("platform", "pytorch_libtorch"),
       "manifest field 'platform': unknown platform 'pytorch_libtorch'"},
      {"no entry_point", erase("entry_point"),
       "manifest field 'entry_point': required field missing"},
      {"entry_point string", set("entry_point", "model.pkl"),
       "manifest field 'entry_point': expected an object, got a string"},
      {"no kind", set("entry_point", json::object()),
       "manifest field 'entry_point.kind': required field missing"},
      {"unknown kind", set("entry_point", {{"kind", "script"}}),
       "manifest field 'entry_point.kind': unknown kind 'script'"},
      {"pickle with module", set("entry_point", {{"kind", "pickle"}, {"module", "m"}}),
       "manifest field 'entry_point.module': unknown field"},
      {"traversing resource", set("entry_point", {{"kind", "pickle"}, {"resource", "../x.pkl"}}),
       "manifest field 'entry_point.resource': '../x.pkl' is not a safe relative path"},
      {"bad package", set("entry_point", {{"kind", "pickle"}, {"package", "a..b"}}),
       "manifest field 'entry_point.package': 'a..b' is not a dotted package name"},
      {"factory without module", set("entry_point", {{"kind", "factory"}, {"function", "f"}}),
       "manifest field 'entry_point.module': required field missing"},
      {"factory bad module",
       set("entry_point", {{"kind", "factory"}, {"module", "1net"}, {"function", "f"}}),
       "manifest field 'entry_point.module': '1net' is not a dotted Python module name"},
      {"factory bad function",
       set("entry_point", {{"kind", "factory"}, {"module", "net"}, {"function", "make-it"}}),
       "manifest field 'entry_point.function': 'make-it' is not a Python identifier"},
      {"factory with resource",
       set("entry_point",
           {{"kind", "factory"}, {"module", "net"}, {"function", "f"}, {"resource", "x"}}),
       "manifest field 'entry_point.resource': unknown field"},
      {"weights without resource",
       set("entry_point", {{"kind", "factory"},
                           {"module", "net"},
                           {"function", "f"},
                           {"weights", {{"package", "manypy"}}}}),
       "manifest field 'entry_point.weights.resource': required field missing"},
      {"bad method", set("method", "not valid"), "manifest field 'method': 'not valid' is not"},
      {"no inputs", erase("inputs"), "manifest field 'inputs': required field missing"},
      {"inputs empty", set("inputs", json::array()),
       "manifest field 'inputs': must list at least one tensor"},
      {"inputs object", set("inputs", json::object()),
       "manifest field 'inputs': expected a list, got an object"},
      {"input not object", set("inputs", {1}),
       "manifest field 'inputs[0]': expected an object, got an integer"},
      {"no outputs", erase("outputs"), "manifest field 'outputs': required field missing"},
      {"input without name", [](json& j) { j["inputs"][0].erase("name"); },
       "manifest field 'inputs[0].name': required field missing"},
      {"input bad name", [](json& j) { j["inputs"][0]["name"] = "in put"; },
       "manifest field 'inputs[0].name': 'in put' is not 1-128 characters of [A-Za-z0-9_.:-]"},
      {"duplicate output", [](json& j) { j["outputs"].push_back(j["outputs"][0]); },
       "manifest field 'outputs[1].name': duplicate name 'OUTPUT__0'"},
      {"unknown datatype",
       [](json& j) {
         j["inputs"].push_back(j["inputs"][0]);
         j["inputs"][1]["name"] = "INPUT__1";
         j["inputs"][1]["datatype"] = "FLOAT32";
       },
       "manifest field 'inputs[1].datatype': unknown datatype 'FLOAT32' (expected one of BOOL, "
       "UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64, BYTES)"},
      {"no datatype", [](json& j) { j["outputs"][0].erase("datatype"); },
       "manifest field 'outputs[0].datatype': required field missing"},
      {"no shape", [](json& j) { j["inputs"][0].erase("shape"); },
       "manifest field 'inputs[0].shape': required field missing"},
      {"zero dimension",
       [](json& j) {
         j["inputs"][0]["shape"] = {3, 0};
       },
       "manifest field 'inputs[0].shape[1]': expected an integer >= 1 or -1 (variable), got 0"},
      {"dimension -2", [](json& j) { j["inputs"][0]["shape"] = {-2}; },
       "manifest field 'inputs[0].shape[0]': expected an integer >= 1 or -1"},
      {"string dimension", [](json& j) { j["outputs"][0]["shape"] = {"10"}; },
       "manifest field 'outputs[0].shape[0]': expected an integer >= 1 or -1 (variable), got "
       "\"10\""},
      {"unknown tensor field", [](json& j) { j["inputs"][0]["dims"] = {1}; },
       "manifest field 'inputs[0].dims': unknown field"},
      {"negative max_batch_size", set("max_batch_size", -1),
       "manifest field 'max_batch_size': must be in 0..65536, got -1"},
      {"huge max_batch_size", set("max_batch_size", 65537),
       "manifest field 'max_batch_size': must be in 0..65536, got 65537"},
      {"batching list", set("batching", json::array()),
       "manifest field 'batching': expected an object, got a list"},
      {"dynamic string", [](json& j) { j["batching"]["dynamic"] = "yes"; },
       "manifest field 'batching.dynamic': expected a boolean, got a string"},
      {"dynamic without batch", set("max_batch_size", 0),
       "manifest field 'batching.dynamic': dynamic batching needs max_batch_size > 0"},
      {"streaming string", set("streaming", "yes"),
       "manifest field 'streaming': expected a boolean, got a string"},
      {"streaming with dynamic batching", set("streaming", true),
       "manifest field 'streaming': a streaming model answers each request on its own: it "
       "cannot batch dynamically"},
      {"response_cache string", set("response_cache", "yes"),
       "manifest field 'response_cache': expected a boolean, got a string"},
      {"streaming with response_cache",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["streaming"] = true;
         j["response_cache"] = true;
       },
       "manifest field 'streaming': a streaming model's responses cannot be cached (response_cache)"},
      {"sequence_batching list", set("sequence_batching", json::array()),
       "manifest field 'sequence_batching': expected an object, got a list"},
      {"sequence_batching with dynamic batching", set("sequence_batching", json::object()),
       "manifest field 'sequence_batching': a sequence model runs one request of a sequence at "
       "a time: it cannot also batch dynamically (batching.dynamic)"},
      {"sequence_batching zero idle",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["sequence_batching"] = {{"max_sequence_idle_microseconds", 0}};
       },
       "manifest field 'sequence_batching.max_sequence_idle_microseconds': must be >= 1"},
      {"sequence_batching zero sequences",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["sequence_batching"] = {{"max_concurrent_sequences", 0}};
       },
       "manifest field 'sequence_batching.max_concurrent_sequences': must be >= 1"},
      {"unknown sequence_batching field",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["sequence_batching"] = {{"oldest", true}};
       },
       "manifest field 'sequence_batching.oldest': unknown field"},
      {"streaming with sequence_batching",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["streaming"] = true;
         j["sequence_batching"] = json::object();
       },
       "manifest field 'sequence_batching': a streaming model cannot keep sequences"},
      {"response_cache with sequence_batching",
       [](json& j) {
         j["batching"]["dynamic"] = false;
         j["response_cache"] = true;
         j["sequence_batching"] = json::object();
       },
       "manifest field 'sequence_batching': a sequence model's answers depend on its sequence's "
       "state: they cannot be cached (response_cache)"},
      {"preferred 0", [](json& j) { j["batching"]["preferred_batch_sizes"] = {0}; },
       "manifest field 'batching.preferred_batch_sizes[0]': 0 is not an integer in "
       "1..max_batch_size (8)"},
      {"preferred too big",
       [](json& j) {
         j["batching"]["preferred_batch_sizes"] = {4, 16};
       },
       "manifest field 'batching.preferred_batch_sizes[1]': 16 is not an integer in"},
      {"negative delay", [](json& j) { j["batching"]["max_queue_delay_microseconds"] = -1; },
       "manifest field 'batching.max_queue_delay_microseconds': must be >= 0"},
      {"unknown batching field", [](json& j) { j["batching"]["max_delay"] = 1; },
       "manifest field 'batching.max_delay': unknown field"},
      {"negative instance_count", set("instance_count", -1),
       "manifest field 'instance_count': must be >= 0"},
      {"unknown device", set("device", "tpu"), "manifest field 'device': unknown device 'tpu'"},
      {"cuda without index", set("device", "cuda:"), "manifest field 'device': unknown device"},
      {"cuda bad index", set("device", "cuda:x"), "manifest field 'device': unknown device"},
      {"description number", set("description", 5),
       "manifest field 'description': expected a string, got an integer"},
  };
  for (const BadCase& c : cases) {
    json j = Valid();
    c.change(j);
    ExpectRejected(j.dump(), c.message, c.what);
  }
}

}  // namespace
}  // namespace manypy
