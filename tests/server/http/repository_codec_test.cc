// The repository extension's JSON: which index a body asks for, the index as
// a bare array, and load bodies (parameter names out, bad bodies named).
#include "server/http/repository_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace manypy {
namespace {

TEST(RepositoryCodecTest, IndexRequestAsksForReadyOnlyWhenItSaysSo) {
  EXPECT_TRUE(DecodeRepositoryIndexRequest(R"({"ready": true})"));
  EXPECT_FALSE(DecodeRepositoryIndexRequest(R"({"ready": false})"));
  EXPECT_FALSE(DecodeRepositoryIndexRequest("{}"));
  EXPECT_FALSE(DecodeRepositoryIndexRequest(""));
  EXPECT_FALSE(DecodeRepositoryIndexRequest("{"));  // malformed: all models, as Triton
  EXPECT_FALSE(DecodeRepositoryIndexRequest(R"({"ready": "true"})"));
}

TEST(RepositoryCodecTest, IndexIsABareArray) {
  inference::RepositoryIndexResponse index;
  EXPECT_EQ(EncodeRepositoryIndex(index), "[]");
  auto* m = index.add_models();
  m->set_name("two_io");
  m->set_version("1");
  m->set_state("READY");
  std::string json = EncodeRepositoryIndex(index);
  EXPECT_EQ(json.front(), '[');
  EXPECT_NE(json.find(R"("name":"two_io")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("state":"READY")"), std::string::npos) << json;
}

TEST(RepositoryCodecTest, LoadBodyGivesParameterNames) {
  std::vector<std::string> names;
  EXPECT_TRUE(DecodeLoadRequest("", &names).ok());
  EXPECT_TRUE(DecodeLoadRequest("{}", &names).ok());
  EXPECT_TRUE(names.empty());
  ASSERT_TRUE(
      DecodeLoadRequest(R"({"parameters": {"config": "{}", "file:1/model.pt": "x"}})", &names)
          .ok());
  EXPECT_EQ(names, (std::vector<std::string>{"config", "file:1/model.pt"}));
}

TEST(RepositoryCodecTest, BadLoadBodiesNameWhatIsWrong) {
  std::vector<std::string> names;
  Status s = DecodeLoadRequest("[]", &names);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the load request's body is not a JSON object");
  s = DecodeLoadRequest(R"({"parameters": []})", &names);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the load request's \"parameters\" is not an object");
}

}  // namespace
}  // namespace manypy
