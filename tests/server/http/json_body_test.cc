// Every JSON body decoder of the HTTP frontend, given nesting far past
// kMaxJsonDepth (a million levels: enough to overflow any thread's stack in a
// recursive parser), refuses it as InvalidArgument naming the limit, on the
// same thread, without recursing; nesting at the limit still parses.
#include "server/http/json_body.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "server/http/generate_codec.h"
#include "server/http/infer_codec.h"
#include "server/http/openai_request_codec.h"
#include "server/http/repository_codec.h"
#include "server/http/shared_memory_codec.h"

namespace manypy {
namespace {

constexpr size_t kMillion = 1000 * 1000;

/// `levels` arrays, one inside the other, closed or not.
std::string DeepArrays(size_t levels, bool closed = true) {
  return std::string(levels, '[') + (closed ? std::string(levels, ']') : "");
}

/// {"a":{"a":...{"a":1}...}} with `levels` objects.
std::string DeepObjects(size_t levels) {
  std::string s;
  s.reserve(levels * 6 + 1);
  for (size_t i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1";
  s.append(levels, '}');
  return s;
}

/// A body whose field `field` holds `value`: the shape every route reads.
std::string Wrapped(const std::string& field, const std::string& value) {
  return "{\"" + field + "\":" + value + "}";
}

void ExpectDepthRefusal(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
  EXPECT_NE(s.message().find("nested deeper than the limit of 100 levels"), std::string::npos)
      << what << ": " << s.message();
}

TEST(JsonBodyTest, NestingUpToTheLimitParses) {
  rapidjson::Document doc;
  ASSERT_TRUE(ParseJsonBody(DeepArrays(kMaxJsonDepth), "body", &doc).ok());
  EXPECT_TRUE(doc.IsArray());
  ASSERT_TRUE(ParseJsonBody(DeepObjects(kMaxJsonDepth), "body", &doc).ok());
  EXPECT_TRUE(doc.IsObject());
}

TEST(JsonBodyTest, OneLevelPastTheLimitIsRefusedWhereItOpens) {
  rapidjson::Document doc;
  Status s = ParseJsonBody(DeepArrays(kMaxJsonDepth + 1), "the body", &doc);
  ExpectDepthRefusal(s, "arrays");
  EXPECT_EQ(s.message(), "the body is not valid JSON: nested deeper than the limit of 100 levels "
                         "of arrays and objects at offset 100");
  EXPECT_TRUE(doc.IsNull());
  ExpectDepthRefusal(ParseJsonBody(DeepObjects(kMaxJsonDepth + 1), "the body", &doc), "objects");
}

TEST(JsonBodyTest, AMillionLevelsAreRefusedWithoutRecursing) {
  rapidjson::Document doc;
  ExpectDepthRefusal(ParseJsonBody(DeepArrays(kMillion), "body", &doc), "closed arrays");
  ExpectDepthRefusal(ParseJsonBody(DeepArrays(kMillion, false), "body", &doc), "unclosed arrays");
  ExpectDepthRefusal(ParseJsonBody(DeepObjects(kMillion), "body", &doc), "objects");
}

TEST(JsonBodyTest, OtherErrorsKeepRapidjsonsReason) {
  rapidjson::Document doc;
  EXPECT_EQ(ParseJsonBody("[1, 2", "the body", &doc).message(),
            "the body is not valid JSON: Missing a comma or ']' after an array element at offset 5");
  EXPECT_FALSE(ParseJsonBody("[NaN]", "the body", &doc).ok());
  ASSERT_TRUE(ParseJsonBody("[NaN, -Infinity]", "the body", &doc, JsonNumbers::kAllowNanAndInfinity).ok());
  EXPECT_TRUE(std::isnan(doc[0].GetDouble()));
}

TEST(JsonBodyTest, EveryRouteDecoderRefusesAMillionLevels) {
  const std::string arrays = DeepArrays(kMillion);
  const std::string objects = DeepObjects(kMillion);
  inference::ModelMetadataResponse metadata;
  metadata.set_name("m");
  auto* input = metadata.add_inputs();
  input->set_name("INPUT");
  input->set_datatype("FP32");
  input->add_shape(-1);
  for (const std::string* deep : {&arrays, &objects}) {
    {
      HttpInferRequest request;
      ExpectDepthRefusal(DecodeInferRequest(Wrapped("inputs", *deep), std::nullopt, "m", "", &request),
                         "infer");
    }
    {
      inference::ModelInferRequest wire;
      int64_t timeout_us = 0;
      ExpectDepthRefusal(DecodeGenerateRequest(Wrapped("INPUT", *deep), metadata, "", &wire, &timeout_us),
                         "generate");
    }
    for (const char* route : {kCompletionsRoute, kChatRoute, kEmbeddingsRoute}) {
      rapidjson::Document doc;
      OpenAiCall call;
      std::string param;
      ExpectDepthRefusal(DecodeOpenAiCall(Wrapped("messages", *deep), route, &doc, &call, &param), route);
    }
    std::vector<std::string> names;
    ExpectDepthRefusal(DecodeLoadRequest(Wrapped("parameters", *deep), &names), "load");
    EXPECT_FALSE(DecodeRepositoryIndexRequest(Wrapped("ready", *deep)));
    inference::SystemSharedMemoryRegisterRequest system;
    ExpectDepthRefusal(DecodeSystemSharedMemoryRegister(Wrapped("key", *deep), "r", &system),
                       "system shared memory");
    inference::CudaSharedMemoryRegisterRequest cuda;
    ExpectDepthRefusal(DecodeCudaSharedMemoryRegister(Wrapped("raw_handle", *deep), "r", &cuda),
                       "cuda shared memory");
  }
}

}  // namespace
}  // namespace manypy
