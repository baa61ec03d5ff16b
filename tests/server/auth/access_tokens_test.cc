// AccessTokens and the load-request checks: token files, bearer parsing, which
// token opens which scope, and names or load parameters that could pick a file.
#include "server/auth/access_tokens.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "server/core/load_request.h"
#include "server/lifecycle/model_name.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

class TokenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("manypy_tokens_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(TokenFiles, OneTokenWithItsTrailingNewlineTrimmed) {
  auto token = ReadTokenFile(Write("t", "  s3cr3t-Token_1\r\n\n"), "auth-token-file");
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "s3cr3t-Token_1");
}

TEST_F(TokenFiles, EmptyUnreadableOrTwoWordFilesAreRefusedWithoutShowingTheToken) {
  auto empty = ReadTokenFile(Write("empty", " \n"), "auth-token-file");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("--auth-token-file"), std::string::npos);
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
  auto missing = ReadTokenFile((dir_ / "nope").string(), "management-token-file");
  EXPECT_NE(missing.status().message().find("cannot read"), std::string::npos);
  EXPECT_NE(missing.status().message().find("--management-token-file"), std::string::npos);
  auto two = ReadTokenFile(Write("two", "first-secret second-secret\n"), "auth-token-file");
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(two.status().message().find("first-secret"), std::string::npos);
  auto same = AccessTokens::Load(Write("a", "same-token\n"), Write("b", "same-token"));
  EXPECT_EQ(same.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(same.status().message().find("same-token"), std::string::npos);
}

TEST(AccessTokens, WithoutTokensEverythingIsOpen) {
  AccessTokens none;
  EXPECT_TRUE(none.Authorize("", AccessScope::kInference).ok());
  EXPECT_TRUE(none.Authorize("", AccessScope::kManagement).ok());
  EXPECT_TRUE(none.Authorize("Bearer anything", AccessScope::kManagement).ok());
}

TEST(AccessTokens, InferenceTokenOpensInferenceAndManagementTokenOpensBoth) {
  AccessTokens tokens("infer-token", "admin-token");
  EXPECT_TRUE(tokens.Authorize("", AccessScope::kOpen).ok());
  EXPECT_TRUE(tokens.Authorize("Bearer infer-token", AccessScope::kInference).ok());
  EXPECT_TRUE(tokens.Authorize("bearer   infer-token ", AccessScope::kInference).ok());  // RFC 6750
  EXPECT_TRUE(tokens.Authorize("Bearer admin-token", AccessScope::kInference).ok());
  EXPECT_TRUE(tokens.Authorize("Bearer admin-token", AccessScope::kManagement).ok());

  Status missing = tokens.Authorize("", AccessScope::kInference);
  EXPECT_EQ(missing.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(missing.message().find("Bearer"), std::string::npos);
  Status wrong = tokens.Authorize("Bearer infer-tokem", AccessScope::kInference);
  EXPECT_EQ(wrong.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.message().find("infer-tok"), std::string::npos) << wrong.message();
  EXPECT_EQ(tokens.Authorize("Basic infer-token", AccessScope::kInference).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(tokens.Authorize("infer-token", AccessScope::kInference).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(tokens.Authorize("Bearer infer-token-and-more", AccessScope::kInference).code(),
            StatusCode::kUnauthenticated);

  Status denied = tokens.Authorize("Bearer infer-token", AccessScope::kManagement);
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("--management-token-file"), std::string::npos);
  EXPECT_EQ(tokens.Authorize("Bearer nope", AccessScope::kManagement).code(),
            StatusCode::kUnauthenticated);
}

TEST(AccessTokens, OneTokenGuardsEverythingAndAManagementTokenAloneGuardsOnlyManagement) {
  AccessTokens one("only-token", "");
  EXPECT_TRUE(one.Authorize("Bearer only-token", AccessScope::kManagement).ok());
  EXPECT_EQ(one.Authorize("", AccessScope::kManagement).code(), StatusCode::kUnauthenticated);
  AccessTokens admin_only("", "admin-token");
  EXPECT_TRUE(admin_only.Authorize("", AccessScope::kInference).ok());
  EXPECT_EQ(admin_only.Authorize("", AccessScope::kManagement).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(admin_only.Authorize("Bearer admin-token", AccessScope::kManagement).ok());
}

TEST(LoadRequest, ModelsLoadByNameOnly) {
  EXPECT_TRUE(CheckModelName("resnet18").ok());
  EXPECT_TRUE(CheckModelName("my-model_v2.1").ok());
  for (const std::string& path : std::vector<std::string>{"../two_io", "/etc/passwd", "a/b", "a\\b", "..", "x..y",
                           std::string("two_io\0.mpk", 11)}) {
    Status s = CheckModelName(path);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << path;
    EXPECT_NE(s.message().find("only by name"), std::string::npos) << s.message();
  }
  EXPECT_EQ(CheckModelName("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckModelName(".hidden").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckModelName("a b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckModelName(std::string(129, 'a')).code(), StatusCode::kInvalidArgument);
}

TEST(LoadRequest, ParametersThatCouldChooseAFileOrConfigAreRefused) {
  EXPECT_TRUE(CheckLoadParameters({}).ok());
  for (const char* name : {"config", "file:1/model.py"}) {
    Status s = CheckLoadParameters({name});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("only by name"), std::string::npos) << s.message();
  }
  EXPECT_EQ(CheckLoadParameters({"anything"}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manypy
