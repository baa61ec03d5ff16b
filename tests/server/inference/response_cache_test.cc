// ResponseCache and its key on their own: least recently used eviction by
// bytes, owners dropped on reload, private copies, and a key that tells
// apart every field that decides an answer. No threads, no Python.
#include "server/inference/response_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "server/inference/cache_key.h"

namespace manypy {
namespace {

CacheKey Key(uint64_t owner, uint8_t tag) {
  CacheKey k{owner, {}};
  k.digest[0] = tag;
  return k;
}

// One FP32 output of `n` floats, all `value`.
std::vector<Value> Outputs(int64_t n, float value) { return {Value(at::full({n}, value))}; }

TEST(ResponseCacheStoreTest, FindsWhatWasInsertedAndCountsHitsAndMisses) {
  ResponseCache cache(1 << 20);
  uint64_t owner = cache.NewOwner();
  EXPECT_FALSE(cache.Find(Key(owner, 1)).has_value());
  ASSERT_TRUE(cache.Insert(Key(owner, 1), Outputs(4, 2.f)));
  auto hit = cache.Find(Key(owner, 1));
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->at(0).to_tensor().equal(at::full({4}, 2.f)));
  EXPECT_FALSE(cache.Find(Key(owner, 2)).has_value());
  EXPECT_FALSE(cache.Find(Key(cache.NewOwner(), 1)).has_value());  // another load's
  ResponseCache::Totals t = cache.totals();
  EXPECT_EQ(t.hits, 1u);
  EXPECT_EQ(t.misses, 3u);
  EXPECT_EQ(t.entries, 1u);
  EXPECT_EQ(t.bytes, ResponseCache::EntryBytes(Outputs(4, 0.f)));
}

TEST(ResponseCacheStoreTest, KeepsAPrivateCopyOfTheOutputs) {
  ResponseCache cache(1 << 20);
  uint64_t owner = cache.NewOwner();
  std::vector<Value> outputs = Outputs(4, 1.f);
  ASSERT_TRUE(cache.Insert(Key(owner, 1), outputs));
  outputs[0].to_tensor().fill_(7.f);  // a model writing into a buffer it keeps
  EXPECT_TRUE(cache.Find(Key(owner, 1))->at(0).to_tensor().equal(at::full({4}, 1.f)));
}

TEST(ResponseCacheStoreTest, EvictsTheLeastRecentlyUsedByBytes) {
  const int64_t entry = ResponseCache::EntryBytes(Outputs(256, 0.f));
  ResponseCache cache(3 * entry);
  uint64_t owner = cache.NewOwner();
  for (uint8_t tag = 1; tag <= 3; ++tag) ASSERT_TRUE(cache.Insert(Key(owner, tag), Outputs(256, tag)));
  ASSERT_TRUE(cache.Find(Key(owner, 1)).has_value());  // 2 is now the least recently used
  ASSERT_TRUE(cache.Insert(Key(owner, 4), Outputs(256, 4.f)));
  EXPECT_FALSE(cache.Find(Key(owner, 2)).has_value());
  EXPECT_TRUE(cache.Find(Key(owner, 1)).has_value());
  EXPECT_TRUE(cache.Find(Key(owner, 3)).has_value());
  EXPECT_TRUE(cache.Find(Key(owner, 4)).has_value());
  // One twice as large evicts two.
  ASSERT_TRUE(cache.Insert(Key(owner, 5), Outputs(512 + 64, 5.f)));
  ResponseCache::Totals t = cache.totals();
  EXPECT_LE(t.bytes, 3 * entry);
  EXPECT_EQ(t.evictions, 3u);
  EXPECT_EQ(t.entries, 2u);
  EXPECT_TRUE(cache.Find(Key(owner, 5)).has_value());
}

TEST(ResponseCacheStoreTest, RefusesAnEntryLargerThanTheWholeCache) {
  ResponseCache cache(1024);
  uint64_t owner = cache.NewOwner();
  EXPECT_FALSE(cache.Insert(Key(owner, 1), Outputs(1024, 1.f)));
  EXPECT_EQ(cache.totals().entries, 0u);
}

TEST(ResponseCacheStoreTest, DroppingAnOwnerFreesItsEntriesAndRefusesItsLaterInserts) {
  ResponseCache cache(1 << 20);
  uint64_t old_load = cache.NewOwner(), new_load = cache.NewOwner();
  ASSERT_TRUE(cache.Insert(Key(old_load, 1), Outputs(4, 1.f)));
  ASSERT_TRUE(cache.Insert(Key(new_load, 1), Outputs(4, 2.f)));
  cache.DropOwner(old_load);
  EXPECT_FALSE(cache.Find(Key(old_load, 1)).has_value());
  EXPECT_TRUE(cache.Find(Key(new_load, 1)).has_value());
  EXPECT_EQ(cache.totals().entries, 1u);
  EXPECT_EQ(cache.totals().bytes, ResponseCache::EntryBytes(Outputs(4, 0.f)));
  // A request of the old load that was still running stores nothing.
  EXPECT_FALSE(cache.Insert(Key(old_load, 2), Outputs(4, 1.f)));
}

// --- the key ---

Manifest TwoInputs() {
  Manifest m;
  m.name = "m";
  m.version = 1;
  m.inputs = {{"A", "FP32", {-1}}, {"B", "INT64", {-1}}};
  return m;
}

struct Request {
  InferenceRequest prepared;
  inference::ModelInferRequest wire;
};

Request Make(at::Tensor a, at::Tensor b) {
  Request r;
  r.prepared.inputs = {Value(std::move(a)), Value(std::move(b))};
  return r;
}

Request Base() { return Make(at::arange(4, at::kFloat), at::arange(4, at::kLong)); }

CacheKey KeyOf(const Request& r, const Manifest& m = TwoInputs(), uint64_t owner = 1) {
  return ResponseCacheKey(owner, m, r.prepared, r.wire);
}

TEST(CacheKeyTest, EqualRequestsHaveEqualKeys) {
  EXPECT_EQ(KeyOf(Base()), KeyOf(Base()));
  // Parameters in another order are the same parameters.
  Request a = Base(), b = Base();
  (*a.wire.mutable_parameters())["x"].set_int64_param(1);
  (*a.wire.mutable_parameters())["y"].set_string_param("s");
  (*b.wire.mutable_parameters())["y"].set_string_param("s");
  (*b.wire.mutable_parameters())["x"].set_int64_param(1);
  EXPECT_EQ(KeyOf(a), KeyOf(b));
}

TEST(CacheKeyTest, EveryFieldThatDecidesTheAnswerChangesTheKey) {
  const CacheKey base = KeyOf(Base());
  Request bytes = Make(at::arange(4, at::kFloat), at::tensor({0, 1, 2, 4}, at::kLong));
  EXPECT_FALSE(KeyOf(bytes) == base) << "input bytes";
  Request shape = Make(at::arange(4, at::kFloat).reshape({2, 2}), at::arange(4, at::kLong));
  EXPECT_FALSE(KeyOf(shape) == base) << "input shape";
  Request dtype = Make(at::arange(4, at::kDouble), at::arange(4, at::kLong));
  EXPECT_FALSE(KeyOf(dtype) == base) << "input datatype";
  Manifest renamed = TwoInputs();
  renamed.inputs[0].name = "C";
  EXPECT_FALSE(KeyOf(Base(), renamed) == base) << "input name";
  Manifest v2 = TwoInputs();
  v2.version = 2;
  EXPECT_FALSE(KeyOf(Base(), v2) == base) << "model version";
  Manifest other = TwoInputs();
  other.name = "n";
  EXPECT_FALSE(KeyOf(Base(), other) == base) << "model name";
  EXPECT_FALSE(KeyOf(Base(), TwoInputs(), 2) == base) << "owner (load)";
  Request output = Base();
  output.wire.add_outputs()->set_name("OUT");
  EXPECT_FALSE(KeyOf(output) == base) << "requested output";
  Request output_parameter = Base();
  output_parameter.wire.add_outputs()->set_name("OUT");
  (*output_parameter.wire.mutable_outputs(0)->mutable_parameters())["classification"]
      .set_int64_param(3);
  EXPECT_FALSE(KeyOf(output_parameter) == KeyOf(output)) << "output parameter";
  Request parameter = Base();
  (*parameter.wire.mutable_parameters())["x"].set_int64_param(1);
  EXPECT_FALSE(KeyOf(parameter) == base) << "request parameter";
  Request typed = Base();
  (*typed.wire.mutable_parameters())["x"].set_string_param("1");
  EXPECT_FALSE(KeyOf(typed) == KeyOf(parameter)) << "parameter type";
}

TEST(CacheKeyTest, BytesInputsAreKeyedByEveryElement) {
  Manifest m;
  m.name = "t";
  m.inputs = {{"TEXT", "BYTES", {-1}}};
  auto make = [](std::vector<std::string> items) {
    Request r;
    Value::Items values;
    for (auto& s : items) values.push_back(Value::Bytes(s));
    r.prepared.inputs = {Value::List(std::move(values))};
    return r;
  };
  EXPECT_EQ(KeyOf(make({"ab", "c"}), m), KeyOf(make({"ab", "c"}), m));
  EXPECT_FALSE(KeyOf(make({"ab", "c"}), m) == KeyOf(make({"a", "bc"}), m));
}

}  // namespace
}  // namespace manypy
