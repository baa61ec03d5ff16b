// Inputs that reach the decoders' limits: a custom mutation that repeats a chunk thousands
// of times (deep nesting, huge counts, long strings and numbers), and independent oracles
// of how deep an input nests, to check that a too-deep input is refused naming the limit.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace manypy::fuzz {

/// What MutateDeep repeats: ready-made units (an opener and what closes one of it, such as
/// "[" and "]"), and how to close a chunk cut from the input itself.
struct DeepGrammar {
  std::vector<std::pair<std::string, std::string>> units;
  std::string (*closer)(std::string_view chunk);
};

/// JSON: arrays, objects, members, list items, long strings and numbers. A chunk closes
/// with the brackets it opens, innermost first.
const DeepGrammar& JsonGrammar();
/// Protobuf wire format: start-group tags (closed by their end-group tags).
const DeepGrammar& ProtobufGrammar();

/// libFuzzer's custom mutator: one call in four (when the input has room) inserts a unit
/// or a chunk of the input N times at a random place, N log-uniform up to 16384 and
/// capped by `max_size`, then closes the N copies right after them, further on, or not at
/// all; otherwise libFuzzer's own mutations (LLVMFuzzerMutate, dictionary included). The
/// input stays literal bytes, so every input remains reachable. Returns the new size.
size_t MutateDeep(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                  const DeepGrammar& grammar);

/// The deepest nesting of arrays and objects rapidjson's reader opens in `text` before it
/// finishes or fails (with kParseNanAndInfFlag when `nan_and_infinity`), counted by a
/// handler of its own up to kMaxJsonDepth + 1 (where it stops reading): the oracle for
/// ParseJsonBody's depth bound.
int RapidJsonDepth(std::string_view text, bool nan_and_infinity);

/// The same for nlohmann's parser (the manifest's), up to kMaxJsonDepth + 1.
int NlohmannJsonDepth(std::string_view text);

/// The deepest nesting of groups at the top level of a protobuf message in `bytes`, up to
/// the first malformed field (length-delimited fields are skipped, not looked into).
int ProtobufGroupDepth(std::string_view bytes);

/// Checks a JSON decoder's verdict `s` on a body whose parse opens `depth` levels:
/// deeper than kMaxJsonDepth must be INVALID_ARGUMENT "<what> is not valid JSON: nested
/// deeper than the limit of 100 levels..."; no deeper, and no such refusal.
void CheckDepthVerdict(const Status& s, int depth, std::string_view what);

}  // namespace manypy::fuzz
