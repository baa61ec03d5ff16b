#include "server/http/http_route_table.h"

namespace manypy {
namespace {

/// `pattern` with each optional group left out and put in: 2^groups texts,
/// "without" before "with" for each group.
std::vector<std::string> Expand(std::string_view pattern) {
  std::vector<std::string> texts{""};
  size_t i = 0;
  while (i < pattern.size()) {
    size_t open = pattern.find('[', i);
    std::string_view fixed = pattern.substr(i, open == std::string_view::npos ? open : open - i);
    for (std::string& text : texts) text += fixed;
    if (open == std::string_view::npos) break;
    size_t close = pattern.find(']', open + 1);
    std::string_view group =
        pattern.substr(open + 1, close == std::string_view::npos ? close : close - open - 1);
    std::vector<std::string> with = texts;
    for (std::string& text : with) text += group;
    texts.insert(texts.end(), with.begin(), with.end());
    if (close == std::string_view::npos) break;
    i = close + 1;
  }
  return texts;
}

}  // namespace

std::vector<std::string> SplitPath(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    parts.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing slash
  return parts;
}

const std::string& PathParams::operator[](std::string_view name) const {
  static const std::string kNone;
  for (const auto& [key, value] : values_) {
    if (key == name) return value;
  }
  return kNone;
}

void PathParams::Set(std::string_view name, std::string value) {
  for (auto& [key, old] : values_) {
    if (key == name) {
      old = std::move(value);
      return;
    }
  }
  values_.emplace_back(std::string(name), std::move(value));
}

PathPattern::PathPattern(std::string_view pattern) {
  for (const std::string& text : Expand(pattern)) {
    std::vector<Segment> segments;
    for (std::string& part : SplitPath(text)) {
      Segment segment;
      segment.parameter = part.size() >= 2 && part.front() == '{' && part.back() == '}';
      segment.text = segment.parameter ? part.substr(1, part.size() - 2) : std::move(part);
      if (segment.parameter) {
        bool known = false;
        for (const std::string& name : parameters_) known = known || name == segment.text;
        if (!known) parameters_.push_back(segment.text);
      }
      segments.push_back(std::move(segment));
    }
    alternatives_.push_back(std::move(segments));
  }
}

bool PathPattern::Match(const std::vector<std::string>& path, PathParams* params) const {
  for (const std::vector<Segment>& segments : alternatives_) {
    if (segments.size() != path.size()) continue;
    bool matches = true;
    for (size_t i = 0; i < path.size() && matches; ++i) {
      matches = segments[i].parameter || segments[i].text == path[i];
    }
    if (!matches) continue;
    params->Clear();
    for (const std::string& name : parameters_) params->Set(name, "");
    for (size_t i = 0; i < path.size(); ++i) {
      if (segments[i].parameter) params->Set(segments[i].text, path[i]);
    }
    return true;
  }
  return false;
}

}  // namespace manypy
