#include "server/http/json_body.h"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <string>

namespace manypy {
namespace {

// Forwards the reader's events to the document, refusing a container that
// would open one level past the limit (rapidjson's Document has no depth
// bound of its own, and its recursive parser has none either).
class DepthBoundedBuilder {
 public:
  explicit DepthBoundedBuilder(rapidjson::Document& doc) : doc_(doc) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned i) { return doc_.Uint(i); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t i) { return doc_.Uint64(i); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return doc_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return Open() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType members) { --depth_; return doc_.EndObject(members); }
  bool StartArray() { return Open() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { --depth_; return doc_.EndArray(elements); }

 private:
  bool Open() {
    if (++depth_ <= kMaxJsonDepth) return true;
    too_deep_ = true;
    return false;
  }

  rapidjson::Document& doc_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// rapidjson's "Missing a comma or ']' after an array element." without the
// period, so that " at offset N" can follow it.
std::string Sentence(const char* text) {
  std::string s(text);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

template <unsigned kFlags>
rapidjson::ParseResult Build(std::string_view text, rapidjson::Document* doc, bool* too_deep) {
  rapidjson::ParseResult result;
  auto generate = [&](rapidjson::Document& target) {
    rapidjson::MemoryStream bytes(text.data(), text.size());
    rapidjson::Reader reader;
    DepthBoundedBuilder builder(target);
    result = reader.Parse<kFlags | rapidjson::kParseIterativeFlag>(bytes, builder);
    *too_deep = builder.too_deep();
    return !result.IsError();
  };
  doc->Populate(generate);
  return result;
}

}  // namespace

Status ParseJsonBody(std::string_view text, std::string_view what, rapidjson::Document* doc,
                     JsonNumbers numbers) {
  doc->SetNull();
  bool too_deep = false;
  rapidjson::ParseResult result =
      numbers == JsonNumbers::kAllowNanAndInfinity
          ? Build<rapidjson::kParseNanAndInfFlag>(text, doc, &too_deep)
          : Build<rapidjson::kParseDefaultFlags>(text, doc, &too_deep);
  if (!result.IsError()) return Status::Ok();
  doc->SetNull();
  std::string reason = too_deep ? "nested deeper than the limit of " + std::to_string(kMaxJsonDepth) +
                                      " levels of arrays and objects"
                                : Sentence(rapidjson::GetParseError_En(result.Code()));
  return InvalidArgument(std::string(what) + " is not valid JSON: " + reason + " at offset " +
                         std::to_string(result.Offset()));
}

}  // namespace manypy
