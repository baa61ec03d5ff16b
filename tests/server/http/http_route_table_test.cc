// RouteTable and PathPattern: SplitPath's segments, optional groups and
// parameters, first match wins, and the KServe v2 paths the router's table
// must tell apart (a table of the same patterns, naming each route).
#include "server/http/http_route_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace manypy {
namespace {

using Strings = std::vector<std::string>;

TEST(HttpRouteTableTest, SplitPathDropsQueryLeadingAndOneTrailingSlash) {
  EXPECT_EQ(SplitPath("/v2/models/m/infer"), (Strings{"v2", "models", "m", "infer"}));
  EXPECT_EQ(SplitPath("/v2/models/m/?x=1&y=/a"), (Strings{"v2", "models", "m"}));
  EXPECT_EQ(SplitPath("/v2/models//infer"), (Strings{"v2", "models", "", "infer"}));
  EXPECT_EQ(SplitPath("/v2//"), (Strings{"v2", ""}));
  EXPECT_EQ(SplitPath("/"), Strings{});
  EXPECT_EQ(SplitPath(""), Strings{});
}

TEST(HttpRouteTableTest, PatternMatchesWholeSegments) {
  PathPattern pattern("/v2/health/live");
  PathParams params;
  EXPECT_TRUE(pattern.Match(SplitPath("/v2/health/live"), &params));
  EXPECT_TRUE(pattern.Match(SplitPath("/v2/health/live/"), &params));
  EXPECT_FALSE(pattern.Match(SplitPath("/v2/health/liveness"), &params));
  EXPECT_FALSE(pattern.Match(SplitPath("/v2/health"), &params));
  EXPECT_FALSE(pattern.Match(SplitPath("/v2/health/live/x"), &params));
}

TEST(HttpRouteTableTest, OptionalGroupAndParameters) {
  PathPattern pattern("/v2/models/{name}[/versions/{version}]/infer");
  PathParams params;
  ASSERT_TRUE(pattern.Match(SplitPath("/v2/models/m/infer"), &params));
  EXPECT_EQ(params["name"], "m");
  EXPECT_EQ(params["version"], "");  // the group left out
  ASSERT_TRUE(pattern.Match(SplitPath("/v2/models/m/versions/3/infer"), &params));
  EXPECT_EQ(params["name"], "m");
  EXPECT_EQ(params["version"], "3");
  ASSERT_TRUE(pattern.Match(SplitPath("/v2/models//infer"), &params));  // a parameter may be empty
  EXPECT_EQ(params["name"], "");
  EXPECT_EQ(params["other"], "");  // not in the pattern
  EXPECT_FALSE(pattern.Match(SplitPath("/v2/models/m/versions/infer"), &params));
  EXPECT_FALSE(pattern.Match(SplitPath("/v2/models/m/v/3/infer"), &params));
}

TEST(HttpRouteTableTest, GroupInTheMiddleAndUnclosedGroup) {
  PathPattern middle("/v2/systemsharedmemory[/region/{name}]/status");
  PathParams params;
  ASSERT_TRUE(middle.Match(SplitPath("/v2/systemsharedmemory/status"), &params));
  EXPECT_EQ(params["name"], "");
  ASSERT_TRUE(middle.Match(SplitPath("/v2/systemsharedmemory/region/r/status"), &params));
  EXPECT_EQ(params["name"], "r");
  EXPECT_FALSE(middle.Match(SplitPath("/v2/systemsharedmemory/region/status"), &params));

  PathPattern unclosed("/a[/b/{x}");  // runs to the end
  ASSERT_TRUE(unclosed.Match(SplitPath("/a"), &params));
  ASSERT_TRUE(unclosed.Match(SplitPath("/a/b/1"), &params));
  EXPECT_EQ(params["x"], "1");
}

// The router's table, each route named by its handler.
const RouteTable<std::string>& KServeRoutes() {
  static const RouteTable<std::string> routes{
      {"GET", "/v2", "server metadata"},
      {"GET", "/v2/health/live", "live"},
      {"GET", "/v2/health/ready", "ready"},
      {"GET", "/v2/models/stats", "all stats"},
      {"GET", "/v2/models/{name}[/versions/{version}]", "model metadata"},
      {"GET", "/v2/models/{name}[/versions/{version}]/ready", "model ready"},
      {"GET", "/v2/models/{name}[/versions/{version}]/stats", "model stats"},
      {"POST", "/v2/models/{name}[/versions/{version}]/infer", "infer"},
      {"POST", "/v2/repository/models/{name}/load", "load"},
      {"GET", "/v2/systemsharedmemory[/region/{name}]/status", "shm status"},
  };
  return routes;
}

/// "route name(version)" or "none".
std::string Route(const std::string& method, const std::string& target) {
  PathParams params;
  const std::string* name = KServeRoutes().Find(method, target, &params);
  if (name == nullptr) return "none";
  return *name + " " + params["name"] + "(" + params["version"] + ")";
}

TEST(HttpRouteTableTest, KServePathsGoToTheirRoutes) {
  EXPECT_EQ(Route("GET", "/v2"), "server metadata ()");
  EXPECT_EQ(Route("GET", "/v2/"), "server metadata ()");
  EXPECT_EQ(Route("GET", "/v2/health/ready?verbose=1"), "ready ()");
  EXPECT_EQ(Route("POST", "/v2/models/m/infer"), "infer m()");
  EXPECT_EQ(Route("POST", "/v2/models/m/versions/2/infer"), "infer m(2)");
  EXPECT_EQ(Route("GET", "/v2/models/m"), "model metadata m()");
  EXPECT_EQ(Route("GET", "/v2/models/m/versions/2"), "model metadata m(2)");
  // A version named like an action is a version.
  EXPECT_EQ(Route("GET", "/v2/models/m/versions/ready"), "model metadata m(ready)");
  EXPECT_EQ(Route("GET", "/v2/models/versions/ready"), "model ready versions()");
  EXPECT_EQ(Route("POST", "/v2/repository/models/m/load"), "load m()");
  EXPECT_EQ(Route("GET", "/v2/systemsharedmemory/region/r/status"), "shm status r()");
}

TEST(HttpRouteTableTest, FirstMatchWins) {
  EXPECT_EQ(Route("GET", "/v2/models/stats"), "all stats ()");
  // A model named "stats" is still reachable with anything after its name.
  EXPECT_EQ(Route("GET", "/v2/models/stats/ready"), "model ready stats()");
  EXPECT_EQ(Route("GET", "/v2/models/stats/versions/1"), "model metadata stats(1)");
}

TEST(HttpRouteTableTest, WrongMethodOrUnknownPathIsNoRoute) {
  EXPECT_EQ(Route("GET", "/v2/models/m/infer"), "none");
  EXPECT_EQ(Route("POST", "/v2/models/m"), "none");
  EXPECT_EQ(Route("PUT", "/v2/health/live"), "none");
  EXPECT_EQ(Route("get", "/v2/health/live"), "none");  // methods compare exactly
  EXPECT_EQ(Route("GET", "/v2/nothing/here"), "none");
  EXPECT_EQ(Route("GET", "/v3/health/live"), "none");
  EXPECT_EQ(Route("GET", "/v2/models/m/versions"), "none");
  EXPECT_EQ(Route("GET", "/v2/models/m/versions/2/ready/x"), "none");
  EXPECT_EQ(Route("GET", "/"), "none");
}

}  // namespace
}  // namespace manypy
