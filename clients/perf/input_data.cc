#include "clients/perf/input_data.h"

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "common/datatype.h"

namespace manypy::perf {
namespace {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open input file '" + path + "'");
  std::stringstream data;
  data << in.rdbuf();
  return data.str();
}

// Random bytes valid for `datatype`: small values, so models that do
// arithmetic or indexing behave; BOOL as 0/1. Empty for an unknown datatype.
std::string RandomRaw(const std::string& datatype, int64_t count, int string_length,
                      std::mt19937* rng) {
  const DatatypeInfo* info = FindDatatype(datatype);
  if (info == nullptr) return {};
  if (info->type == Datatype::kBytes) {
    std::uniform_int_distribution<int> letter('a', 'z');
    std::vector<std::string> elements(count);
    for (auto& e : elements) {
      for (int i = 0; i < string_length; ++i) e.push_back(static_cast<char>(letter(*rng)));
    }
    return client::EncodeBytesElements(elements);
  }
  size_t width = info->wire_size;
  std::string raw(count * width, '\0');
  std::uniform_int_distribution<int> small(0, 100);
  for (int64_t i = 0; i < count; ++i) {
    char* p = raw.data() + i * width;
    int v = info->type == Datatype::kBool ? small(*rng) % 2 : small(*rng);
    switch (info->type) {
      case Datatype::kFp32: {
        float f = v / 100.0f;
        memcpy(p, &f, 4);
        break;
      }
      case Datatype::kFp64: {
        double d = v / 100.0;
        memcpy(p, &d, 8);
        break;
      }
      case Datatype::kFp16: p[1] = 0x3c; break;  // 1.0 is 0x3c00
      case Datatype::kBf16:  // 1.0 is 0x3f80
        p[1] = 0x3f;
        p[0] = static_cast<char>(0x80);
        break;
      default: p[0] = static_cast<char>(v);  // little-endian: the low byte, rest zero
    }
  }
  return raw;
}

// The inputs of input set `set`: an input with one file uses it in every set.
StatusOr<client::InferInputs> MakeInputs(const inference::ModelMetadataResponse& metadata,
                                         bool batching, const PerfOptions& options, size_t set) {
  std::mt19937 rng(42);
  client::InferInputs inputs;
  for (const auto& m : metadata.inputs()) {
    std::vector<int64_t> shape(m.shape().begin(), m.shape().end());
    if (batching && !shape.empty()) shape[0] = options.batch_size;
    auto file = options.input_files.find(m.name());
    if (file == options.input_files.end()) {
      for (auto& d : shape) d = d < 0 ? 1 : d;
      inputs.push_back(client::InferInput::FromRaw(
          m.name(), m.datatype(), shape,
          RandomRaw(m.datatype(), client::ElementCount(shape), options.string_length, &rng)));
      continue;
    }
    const std::vector<std::string>& files = file->second;
    StatusOr<std::string> raw = ReadFile(files.size() == 1 ? files[0] : files.at(set));
    if (!raw.ok()) return raw.status();
    // Size the one variable dimension from the file; any others become 1.
    int variable = -1, fixed = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] >= 0) fixed *= shape[i];
      else if (variable < 0) variable = static_cast<int>(i);
      else shape[i] = 1;
    }
    const DatatypeInfo* info = FindDatatype(m.datatype());
    size_t width = info == nullptr ? 0 : info->wire_size;
    if (info != nullptr && info->type == Datatype::kBytes) {
      std::vector<std::string> elements;
      if (!client::DecodeBytesElements(*raw, &elements)) {
        return InvalidArgument("--input " + m.name() + ": not 4-byte length-prefixed BYTES data");
      }
      if (variable >= 0) shape[variable] = static_cast<int64_t>(elements.size()) / fixed;
    } else {
      if (width == 0) return InvalidArgument("input " + m.name() + ": unknown datatype " + m.datatype());
      if (variable >= 0) shape[variable] = static_cast<int64_t>(raw->size() / width) / fixed;
      if (static_cast<size_t>(client::ElementCount(shape)) * width != raw->size()) {
        return InvalidArgument("--input " + m.name() + ": " + std::to_string(raw->size()) +
                               " bytes do not fill a " + m.datatype() + " tensor of its shape");
      }
    }
    inputs.push_back(client::InferInput::FromRaw(m.name(), m.datatype(), shape, std::move(*raw)));
  }
  for (const auto& [name, paths] : options.input_files) {
    bool known = false;
    for (const auto& m : metadata.inputs()) known |= m.name() == name;
    if (!known) return InvalidArgument("--input " + name + ": the model has no such input");
  }
  return inputs;
}

}  // namespace

StatusOr<std::vector<client::InferInputs>> MakeInputSets(
    const inference::ModelMetadataResponse& metadata, bool batching, const PerfOptions& options) {
  std::vector<client::InferInputs> sets;
  for (size_t set = 0; set < InputSetCount(options); ++set) {
    StatusOr<client::InferInputs> inputs = MakeInputs(metadata, batching, options, set);
    if (!inputs.ok()) return inputs.status();
    sets.push_back(std::move(*inputs));
  }
  return sets;
}

}  // namespace manypy::perf
