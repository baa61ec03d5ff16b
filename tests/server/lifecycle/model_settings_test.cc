// ResolveModelSettings for stateful sequences: the manifest's settings, the
// --model-config overrides, and the rules they must keep. Pure; no Python.
#include "server/lifecycle/model_settings.h"

#include <gtest/gtest.h>

namespace manypy {
namespace {

Manifest Plain() {
  Manifest m;
  m.name = "gru";
  return m;
}

ServingDefaults With(std::map<std::string, std::string> overrides) {
  ServingDefaults d;
  d.overrides["gru"] = std::move(overrides);
  return d;
}

TEST(ModelSettingsTest, SequenceBatchingComesFromTheManifestOrAnOverride) {
  Manifest m = Plain();
  StatusOr<ModelSettings> s = ResolveModelSettings(m, ServingDefaults(), 2);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->sequences.enabled);

  s = ResolveModelSettings(m,
                           With({{"sequence_batching", "true"},
                                 {"max_sequence_idle_microseconds", "2500"},
                                 {"max_concurrent_sequences", "3"}}),
                           2);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->sequences.enabled);
  EXPECT_EQ(s->sequences.max_sequence_idle_microseconds, 2500);
  EXPECT_EQ(s->sequences.max_concurrent_sequences, 3);

  m.sequence_batching.enabled = true;
  s = ResolveModelSettings(m, With({{"sequence_batching", "false"}}), 2);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->sequences.enabled);
  s = ResolveModelSettings(m, ServingDefaults(), 2);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->sequences.enabled);
  EXPECT_EQ(s->sequences.max_sequence_idle_microseconds, 1000000);  // the defaults
  EXPECT_EQ(s->sequences.max_concurrent_sequences, 256);
}

TEST(ModelSettingsTest, SequenceBatchingRefusesDynamicBatchingStreamingAndZeroLimits) {
  Manifest m = Plain();
  m.max_batch_size = 4;
  m.batching.dynamic = true;
  StatusOr<ModelSettings> s = ResolveModelSettings(m, With({{"sequence_batching", "true"}}), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("model 'gru' has sequence_batching, but a sequence model "
                                      "runs one request of a sequence at a time: it cannot also "
                                      "batch dynamically"),
            std::string::npos)
      << s.status().message();
  // Turning dynamic batching off on the command line makes it fit.
  EXPECT_TRUE(ResolveModelSettings(
                  m, With({{"sequence_batching", "true"}, {"dynamic_batching", "false"}}), 2)
                  .ok());

  Manifest streaming = Plain();
  streaming.streaming = true;
  s = ResolveModelSettings(streaming, With({{"sequence_batching", "true"}}), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cannot keep sequences"), std::string::npos);

  s = ResolveModelSettings(Plain(),
                           With({{"sequence_batching", "true"}, {"response_cache", "true"}}), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cannot be cached (response_cache)"), std::string::npos);

  s = ResolveModelSettings(
      Plain(), With({{"sequence_batching", "true"}, {"max_concurrent_sequences", "0"}}), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("must be >= 1"), std::string::npos);
  EXPECT_EQ(CheckModelSetting("sequence_batching", "yes").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckModelSetting("max_sequence_idle_microseconds", "-1").code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manypy
