#include "fuzz/deep_inputs.h"

#include <nlohmann/json.hpp>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "common/json_limits.h"
#include "fuzz/fuzz_check.h"

// libFuzzer's own mutations, callable from a custom mutator.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace manypy::fuzz {
namespace {

// The brackets `chunk` leaves open, closed innermost first; a dangling string, key or
// list item is finished first so that the closers make sense.
std::string CloseJson(std::string_view chunk) {
  std::string open;
  bool in_string = false, escaped = false;
  for (char c : chunk) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[') open.push_back(']');
    if (c == '{') open.push_back('}');
    if ((c == ']' || c == '}') && !open.empty() && open.back() == c) open.pop_back();
  }
  std::string close = in_string ? "\"" : "";
  if (!in_string && !chunk.empty() && (chunk.back() == ':' || chunk.back() == ',')) close += "0";
  close.append(open.rbegin(), open.rend());
  return close;
}

// The end-group tags of the start-group tags (one-byte tags: fields 1-15) `chunk` opens.
std::string CloseProtobuf(std::string_view chunk) {
  std::string open;
  for (char c : chunk) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x80) continue;
    if ((b & 7) == 3) open.push_back(static_cast<char>(b + 1));
    if ((b & 7) == 4 && !open.empty() && open.back() == c) open.pop_back();
  }
  return std::string(open.rbegin(), open.rend());
}

std::string Repeat(const std::string& unit, size_t n) {
  std::string out;
  out.reserve(unit.size() * n);
  for (size_t i = 0; i < n; ++i) out += unit;
  return out;
}

// Counts the containers rapidjson's reader opens; accepts every event.
struct RapidDepth : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, RapidDepth> {
  int depth = 0, deepest = 0;
  bool StartObject() { return Open(); }
  bool EndObject(rapidjson::SizeType) { --depth; return true; }
  bool StartArray() { return Open(); }
  bool EndArray(rapidjson::SizeType) { --depth; return true; }
  bool Open() {  // stops the parse once past the limit: that is all a caller asks
    deepest = std::max(deepest, ++depth);
    return depth <= kMaxJsonDepth;
  }
};

// The same for nlohmann's SAX interface.
struct NlohmannDepth {
  using json = nlohmann::json;
  int depth = 0, deepest = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool key(json::string_t&) { return true; }
  bool start_object(std::size_t) { return Open(); }
  bool end_object() { --depth; return true; }
  bool start_array(std::size_t) { return Open(); }
  bool end_array() { --depth; return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
  bool Open() {  // stops the parse once past the limit: that is all a caller asks
    deepest = std::max(deepest, ++depth);
    return depth <= kMaxJsonDepth;
  }
};

// A base-128 varint at `*at`; false when it runs past the end or past 10 bytes.
bool ReadVarint(std::string_view bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 70 && *at < bytes.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) return true;
  }
  return false;
}

}  // namespace

const DeepGrammar& JsonGrammar() {
  static const DeepGrammar grammar{
      {{"[", "]"},
       {"{\"a\":", "0}"},
       {"[{\"data\":", "0}]"},
       {"{\"\":[", "]}"},
       {"[[", "]]"},
       {"1,", "1"},
       {"\"a\",", "0"},
       {"{},", "{}"},
       {"9", ""},
       {"a", ""},
       {"\\u0000", ""},
       {"\\ud800", ""},
       {" ", ""}},
      CloseJson};
  return grammar;
}

const DeepGrammar& ProtobufGrammar() {
  static const DeepGrammar grammar{
      {{"\x0b", "\x0c"}, {"\x7b", "\x7c"}, {"\x2b", "\x2c"}, {"\x3b", "\x3c"},
       {"\x08\x80", "\x01"}},  // the last: a varint of N continuation bytes
      CloseProtobuf};
  return grammar;
}

size_t MutateDeep(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                  const DeepGrammar& grammar) {
  std::minstd_rand rng(seed);
  if (rng() % 4 != 0 || size >= max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::string open, close;
  if (size > 0 && rng() % 2 == 0) {
    const size_t start = rng() % size;
    const size_t length = 1 + rng() % std::min<size_t>(size - start, 16);
    open.assign(reinterpret_cast<const char*>(data) + start, length);
    close = grammar.closer(open);
  } else {
    const auto& unit = grammar.units[rng() % grammar.units.size()];
    open = unit.first;
    close = unit.second;
  }
  const size_t unit_size = open.size() + close.size();
  const size_t room = max_size - size;
  if (unit_size > room) return LLVMFuzzerMutate(data, size, max_size);
  const size_t n = std::min<size_t>(1 + rng() % (size_t{1} << (rng() % 15)), room / unit_size);

  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t at = rng() % (size + 1);
  std::string out = in.substr(0, at) + Repeat(open, n);
  switch (rng() % 3) {
    case 0:  // closed at once: [[[]]]
      out += Repeat(close, n) + in.substr(at);
      break;
    case 1: {  // closed further on, around what followed: [[[1]]]
      const size_t after = at + rng() % (size - at + 1);
      out += in.substr(at, after - at) + Repeat(close, n) + in.substr(after);
      break;
    }
    default:  // never closed
      out += in.substr(at);
  }
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

int RapidJsonDepth(std::string_view text, bool nan_and_infinity) {
  rapidjson::MemoryStream bytes(text.data(), text.size());
  rapidjson::Reader reader;
  RapidDepth handler;
  if (nan_and_infinity) {
    reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag>(bytes, handler);
  } else {
    reader.Parse<rapidjson::kParseIterativeFlag>(bytes, handler);
  }
  return handler.deepest;
}

int NlohmannJsonDepth(std::string_view text) {
  NlohmannDepth handler;
  nlohmann::json::sax_parse(text.begin(), text.end(), &handler);
  return handler.deepest;
}

int ProtobufGroupDepth(std::string_view bytes) {
  std::vector<uint64_t> open;  // the field numbers of the open groups
  int deepest = 0;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t tag = 0, value = 0;
    if (!ReadVarint(bytes, &at, &tag) || (tag >> 3) == 0) break;
    const uint64_t field = tag >> 3;
    bool ok = true;
    switch (tag & 7) {
      case 0:
        ok = ReadVarint(bytes, &at, &value);
        break;
      case 1:
        ok = bytes.size() - at >= 8;
        at += ok ? 8 : 0;
        break;
      case 2:
        ok = ReadVarint(bytes, &at, &value) && value <= bytes.size() - at;
        at += ok ? value : 0;
        break;
      case 3:
        open.push_back(field);
        deepest = std::max(deepest, static_cast<int>(open.size()));
        break;
      case 4:
        ok = !open.empty() && open.back() == field;
        if (ok) open.pop_back();
        break;
      case 5:
        ok = bytes.size() - at >= 4;
        at += ok ? 4 : 0;
        break;
      default:
        ok = false;
    }
    if (!ok) break;
  }
  return deepest;
}

void CheckDepthVerdict(const Status& s, int depth, std::string_view what) {
  const std::string refusal = std::string(what) +
                              " is not valid JSON: nested deeper than the limit of " +
                              std::to_string(kMaxJsonDepth) + " levels";
  const bool refused_deep = !s.ok() && s.message().rfind(refusal, 0) == 0;
  if (depth > kMaxJsonDepth) {
    FUZZ_CHECK(refused_deep && s.code() == StatusCode::kInvalidArgument,
               "a body %d levels deep was not refused naming the limit: %s", depth,
               s.ToString().c_str());
  } else {
    FUZZ_CHECK(!refused_deep, "a body %d levels deep was refused as too deep: %s", depth,
               s.ToString().c_str());
  }
}

}  // namespace manypy::fuzz
