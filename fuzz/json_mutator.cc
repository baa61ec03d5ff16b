// The custom mutator of every fuzz target whose input is JSON text (http_infer,
// manifest, openai_request, generate_request, json_bodies): libFuzzer's own
// mutations plus deep repeats of a JSON container, so runs reach the nesting
// limit (deep_inputs.h). Linked into each of those targets; infer_request has
// its own over the protobuf grammar.
#include <cstddef>
#include <cstdint>

#include "fuzz/deep_inputs.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return manypy::fuzz::MutateDeep(data, size, max_size, seed, manypy::fuzz::JsonGrammar());
}
