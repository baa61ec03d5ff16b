// RouteTable: HTTP routes as data, {method, path pattern, handler}, the first
// that matches a request winning; PathPattern, the patterns' matching.
// Immutable once built: Find is thread-safe, no lock.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace manypy {

/// A request target's path as its segments: the query dropped, the leading
/// '/' and one trailing '/' left out ("/v2/models/m/?x=1" -> v2, models, m).
/// Empty segments in between stay ("/v2/models//infer" -> v2, models, "", infer).
std::vector<std::string> SplitPath(std::string_view target);

/// What a pattern's {parameters} matched, by name.
class PathParams {
 public:
  /// The segment `name` matched; "" for one in an optional group the path
  /// left out, and for a name the pattern does not have.
  const std::string& operator[](std::string_view name) const;
  void Set(std::string_view name, std::string value);
  void Clear() { values_.clear(); }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

/// A path pattern: '/'-separated literal segments and {name} parameters, each
/// matching one whole segment (an empty one too), with optional [groups]:
/// "/v2/models/{name}[/versions/{version}]/infer" matches /v2/models/m/infer
/// and /v2/models/m/versions/2/infer. Any text is a pattern: groups do not
/// nest, and one left unclosed runs to the end.
class PathPattern {
 public:
  explicit PathPattern(std::string_view pattern);
  PathPattern(const char* pattern)
      : PathPattern(std::string_view(pattern)) {}  // NOLINT: tables read as text

  /// Whether `path` (SplitPath's segments) matches; if it does, `*params`
  /// holds every parameter of the pattern (those left out "").
  bool Match(const std::vector<std::string>& path, PathParams* params) const;

 private:
  struct Segment {
    std::string text;  ///< the literal, or the parameter's name
    bool parameter = false;
  };
  /// One per choice of the optional groups, in the pattern's order.
  std::vector<std::vector<Segment>> alternatives_;
  std::vector<std::string> parameters_;  ///< every {name} in the pattern
};

/// Routes in the order given; a path two patterns match goes to the first.
template <typename Handler>
class RouteTable {
 public:
  struct Route {
    std::string method;  ///< "GET", "POST", ...: compared exactly
    PathPattern pattern;
    Handler handler;
  };

  RouteTable(std::initializer_list<Route> routes) : routes_(routes) {}

  /// The handler of the first route matching `method` and `target` (its path
  /// parameters in `*params`); null when none does.
  const Handler* Find(std::string_view method, std::string_view target, PathParams* params) const {
    std::vector<std::string> path = SplitPath(target);
    for (const Route& route : routes_) {
      if (route.method == method && route.pattern.Match(path, params)) return &route.handler;
    }
    return nullptr;
  }

 private:
  std::vector<Route> routes_;
};

}  // namespace manypy
