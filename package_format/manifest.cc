#include "package_format/manifest.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>
#include <set>

#include "common/datatype.h"
#include "package_format/json_fields.h"

namespace manypy {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxBatchSize = 65536;

bool Identifier(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// Every `sep`-separated part of `s` satisfies `part` (so no part is empty unless `part` says so).
template <typename Pred>
bool AllParts(const std::string& s, char sep, Pred part) {
  size_t start = 0;
  for (size_t end; (end = s.find(sep, start)) != std::string::npos; start = end + 1)
    if (!part(s.substr(start, end - start))) return false;
  return part(s.substr(start));
}

bool Charset(const std::string& s, size_t max_len, const char* punctuation) {
  return !s.empty() && s.size() <= max_len && std::all_of(s.begin(), s.end(), [&](unsigned char c) {
    return std::isalnum(c) || (c != 0 && std::strchr(punctuation, c) != nullptr);
  });
}

// Python modules and torch.package package names alike.
bool DottedModule(const std::string& s) { return AllParts(s, '.', Identifier); }

// A relative path inside the archive that cannot escape or alias another: no empty, '.' or
// '..' components (so no leading '/'), no backslash or NUL.
bool SafeRelativePath(const std::string& s) {
  return s.size() <= 1024 && s.find_first_of(std::string("\\\0", 2)) == std::string::npos &&
         AllParts(s, '/', [](const std::string& p) { return !p.empty() && p != "." && p != ".."; });
}

// The JSON value as an int64, if it is an integer that fits.
bool AsInt64(const json& j, int64_t* out) {
  if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX))
    return false;
  *out = j.get<int64_t>();
  return true;
}

Status ParseTensors(const JsonFields& top, const std::string& key, std::vector<TensorSpec>* out) {
  StatusOr<const json*> list = top.List(key, true);
  if (!list.ok()) return list.status();
  if ((*list)->empty()) return top.Error(key, "must list at least one tensor");
  std::set<std::string> names;
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const std::string path = key + "[" + std::to_string(i) + "]";
    const json& item = (**list)[i];
    if (!item.is_object())
      return top.Error(path, std::string("expected an object, got ") + JsonFields::TypeName(item));
    JsonFields f(top.archive(), item, top.Path(path) + ".");
    TensorSpec t;
    MANYPY_RETURN_IF_ERROR(f.Only({"name", "datatype", "shape"}));
    MANYPY_RETURN_IF_ERROR(f.String("name", true, &t.name));
    if (!Charset(t.name, 128, "_.:-"))
      return f.Error("name", "'" + t.name + "' is not 1-128 characters of [A-Za-z0-9_.:-]");
    if (!names.insert(t.name).second) return f.Error("name", "duplicate name '" + t.name + "'");
    MANYPY_RETURN_IF_ERROR(f.String("datatype", true, &t.datatype));
    if (!IsValidDatatype(t.datatype))
      return f.Error("datatype", "unknown datatype '" + t.datatype + "' (expected one of " +
                                     DatatypeNames() + ")");
    StatusOr<const json*> shape = f.List("shape", true);
    if (!shape.ok()) return shape.status();
    for (size_t d = 0; d < (*shape)->size(); ++d) {
      int64_t dim = 0;
      if (!AsInt64((**shape)[d], &dim) || (dim < 1 && dim != -1))
        return f.Error("shape[" + std::to_string(d) + "]",
                       "expected an integer >= 1 or -1 (variable), got " + (**shape)[d].dump());
      t.shape.push_back(dim);
    }
    out->push_back(std::move(t));
  }
  return Status::Ok();
}

Status ParseEntryPoint(const JsonFields& top, EntryPoint* ep) {
  StatusOr<const json*> obj = top.Object("entry_point", true);
  if (!obj.ok()) return obj.status();
  JsonFields f(top.archive(), **obj, "entry_point.");
  MANYPY_RETURN_IF_ERROR(f.String("kind", true, &ep->kind));
  if (ep->kind == "pickle" || ep->kind == "torchscript" || ep->kind == "aoti") {
    MANYPY_RETURN_IF_ERROR(f.Only({"kind", "package", "resource"}));
    if (ep->kind == "torchscript") ep->resource = "model.pt";  // its default
    if (ep->kind == "aoti") ep->resource = "model.pt2";        // its default
    MANYPY_RETURN_IF_ERROR(f.String("package", false, &ep->package));
    MANYPY_RETURN_IF_ERROR(f.String("resource", false, &ep->resource));
  } else if (ep->kind == "factory") {
    MANYPY_RETURN_IF_ERROR(f.Only({"kind", "module", "function", "weights"}));
    ep->package.clear();
    ep->resource.clear();
    MANYPY_RETURN_IF_ERROR(f.String("module", true, &ep->module));
    if (!DottedModule(ep->module))
      return f.Error("module", "'" + ep->module + "' is not a dotted Python module name");
    MANYPY_RETURN_IF_ERROR(f.String("function", true, &ep->function));
    if (!Identifier(ep->function))
      return f.Error("function", "'" + ep->function + "' is not a Python identifier");
    StatusOr<const json*> weights = f.Object("weights", false);
    if (!weights.ok()) return weights.status();
    if (*weights == nullptr) return Status::Ok();
    JsonFields w(top.archive(), **weights, "entry_point.weights.");
    MANYPY_RETURN_IF_ERROR(w.Only({"package", "resource"}));
    MANYPY_RETURN_IF_ERROR(w.String("package", true, &ep->weights_package));
    MANYPY_RETURN_IF_ERROR(w.String("resource", true, &ep->weights_resource));
    if (!DottedModule(ep->weights_package))
      return w.Error("package", "'" + ep->weights_package + "' is not a dotted package name");
    if (!SafeRelativePath(ep->weights_resource))
      return w.Error("resource", "'" + ep->weights_resource + "' is not a safe relative path");
    return Status::Ok();
  } else {
    return f.Error("kind",
                   "unknown kind '" + ep->kind + "' (expected pickle, factory, torchscript or aoti)");
  }
  if (!DottedModule(ep->package))
    return f.Error("package", "'" + ep->package + "' is not a dotted package name");
  if (!SafeRelativePath(ep->resource))
    return f.Error("resource", "'" + ep->resource + "' is not a safe relative path");
  return Status::Ok();
}

// "1.13.1", "2.6.0+debian", "3.13.5": digits and dots first, then an optional local tag.
bool VersionString(const std::string& v) {
  if (v.empty() || v.size() > 64 || !std::isdigit(static_cast<unsigned char>(v[0]))) return false;
  return std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '+' || c == '-' || c == '_';
  });
}

Status ParsePackagedWith(const JsonFields& top, PackagedWith* out) {
  StatusOr<const json*> obj = top.Object("packaged_with", true);
  if (!obj.ok()) return obj.status();
  JsonFields f(top.archive(), **obj, "packaged_with.");
  MANYPY_RETURN_IF_ERROR(f.Only({"torch", "python", "manypy"}));
  for (auto [key, value] : {std::pair{"torch", &out->torch}, std::pair{"python", &out->python},
                            std::pair{"manypy", &out->manypy}}) {
    MANYPY_RETURN_IF_ERROR(f.String(key, true, value));
    if (!VersionString(*value))
      return f.Error(key, "'" + *value + "' is not a version (e.g. 2.6.0 or 2.6.0+debian)");
  }
  return Status::Ok();
}

// {major, minor} of "2.6.0+debian"; {-1, -1} when it does not start with N.N.
std::pair<int, int> MajorMinor(const std::string& v) {
  int major = -1, minor = -1;
  if (sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return {-1, -1};
  return {major, minor};
}

}  // namespace

std::string StreamingProblem(const Manifest& m) {
  if (!m.streaming) return "";
  if (m.response_cache) return "a streaming model's responses cannot be cached (response_cache)";
  if (m.platform != kPythonPlatform) return "only a Python model (platform " + std::string(kPythonPlatform) + ") can stream";
  if (m.batching.dynamic)
    return "a streaming model answers each request on its own: it cannot batch dynamically";
  return "";
}

std::string DynamicBatchingProblem(bool dynamic, int64_t max_batch_size) {
  if (dynamic && max_batch_size <= 0) return "dynamic batching needs max_batch_size > 0";
  return "";
}

namespace {

Status ParseBatching(const JsonFields& top, Manifest* m) {
  StatusOr<const json*> obj = top.Object("batching", false);
  if (!obj.ok() || *obj == nullptr) return obj.status();
  JsonFields f(top.archive(), **obj, "batching.");
  MANYPY_RETURN_IF_ERROR(
      f.Only({"dynamic", "preferred_batch_sizes", "max_queue_delay_microseconds"}));
  MANYPY_RETURN_IF_ERROR(f.Bool("dynamic", &m->batching.dynamic));
  std::string problem = DynamicBatchingProblem(m->batching.dynamic, m->max_batch_size);
  if (!problem.empty()) return f.Error("dynamic", problem);
  StatusOr<const json*> sizes = f.List("preferred_batch_sizes", false);
  if (!sizes.ok()) return sizes.status();
  for (size_t i = 0; *sizes != nullptr && i < (*sizes)->size(); ++i) {
    int64_t size = 0;
    if (!AsInt64((**sizes)[i], &size) || size < 1 || size > m->max_batch_size)
      return f.Error("preferred_batch_sizes[" + std::to_string(i) + "]",
                     (**sizes)[i].dump() + " is not an integer in 1..max_batch_size (" +
                         std::to_string(m->max_batch_size) + ")");
    m->batching.preferred_batch_sizes.push_back(size);
  }
  MANYPY_RETURN_IF_ERROR(
      f.Int("max_queue_delay_microseconds", false, &m->batching.max_queue_delay_microseconds));
  if (m->batching.max_queue_delay_microseconds < 0)
    return f.Error("max_queue_delay_microseconds", "must be >= 0");
  return Status::Ok();
}

Status ParseSequenceBatching(const JsonFields& top, Manifest* m) {
  StatusOr<const json*> obj = top.Object("sequence_batching", false);
  if (!obj.ok() || *obj == nullptr) return obj.status();
  SequenceBatchingSpec& s = m->sequence_batching;
  s.enabled = true;
  JsonFields f(top.archive(), **obj, "sequence_batching.");
  MANYPY_RETURN_IF_ERROR(f.Only({"max_sequence_idle_microseconds", "max_concurrent_sequences"}));
  MANYPY_RETURN_IF_ERROR(
      f.Int("max_sequence_idle_microseconds", false, &s.max_sequence_idle_microseconds));
  if (s.max_sequence_idle_microseconds < 1)
    return f.Error("max_sequence_idle_microseconds", "must be >= 1");
  MANYPY_RETURN_IF_ERROR(f.Int("max_concurrent_sequences", false, &s.max_concurrent_sequences));
  if (s.max_concurrent_sequences < 1) return f.Error("max_concurrent_sequences", "must be >= 1");
  std::string problem = SequenceBatchingProblem(*m, m->batching.dynamic, m->response_cache);
  if (!problem.empty()) return top.Error("sequence_batching", problem);
  return Status::Ok();
}

// `openai` (docs/text-generation.md): read here, checked against the
// signature by OpenAiProblem (openai_spec.cc).
Status ParseOpenAi(const JsonFields& top, Manifest* m) {
  StatusOr<const json*> obj = top.Object("openai", false);
  if (!obj.ok() || *obj == nullptr) return obj.status();
  JsonFields f(top.archive(), **obj, "openai.");
  MANYPY_RETURN_IF_ERROR(f.Only({"routes", "inputs", "outputs"}));
  StatusOr<const json*> routes = f.List("routes", true);
  if (!routes.ok()) return routes.status();
  for (size_t i = 0; i < (*routes)->size(); ++i) {
    const json& r = (**routes)[i];
    if (!r.is_string())
      return f.Error("routes[" + std::to_string(i) + "]",
                     std::string("expected a string, got ") + JsonFields::TypeName(r));
    m->openai.routes.push_back(r.get<std::string>());
  }
  for (auto [key, map] : {std::pair{"inputs", &m->openai.inputs},
                          std::pair{"outputs", &m->openai.outputs}}) {
    StatusOr<const json*> fields = f.Object(key, true);
    if (!fields.ok()) return fields.status();
    if (!(*fields)->is_object())
      return f.Error(key, std::string("expected an object, got ") + JsonFields::TypeName(**fields));
    for (const auto& item : (*fields)->items()) {
      if (!item.value().is_string())
        return f.Error(std::string(key) + "." + item.key(),
                       std::string("expected a tensor name, got ") +
                           JsonFields::TypeName(item.value()));
      map->emplace_back(item.key(), item.value().get<std::string>());
    }
  }
  auto [field, problem] = OpenAiProblem(m->openai, m->inputs, m->outputs);
  if (!problem.empty()) return f.Error(field, problem);
  return Status::Ok();
}

}  // namespace

std::string SequenceBatchingProblem(const Manifest& m, bool dynamic, bool response_cache) {
  if (m.platform != kPythonPlatform)
    return "only a Python model (platform " + std::string(kPythonPlatform) +
           ") keeps per-sequence state";
  if (dynamic)
    return "a sequence model runs one request of a sequence at a time: it cannot also batch "
           "dynamically (batching.dynamic)";
  if (m.streaming) return "a streaming model cannot keep sequences";
  if (response_cache)
    return "a sequence model's answers depend on its sequence's state: they cannot be cached "
           "(response_cache)";
  return "";
}

StatusOr<Manifest> ParseManifest(const std::string& json_text,
                                 const std::string& archive_for_errors) {
  StatusOr<json> doc = JsonFields::ParseObject(json_text, archive_for_errors + ": manifest");
  if (!doc.ok()) return doc.status();
  JsonFields f(archive_for_errors, *doc, "");
  Manifest m;
  // The version first: a newer manifest should say so, not fail on its new fields.
  MANYPY_RETURN_IF_ERROR(f.Int("schema_version", true, &m.schema_version));
  if (m.schema_version < 1 || m.schema_version > kManifestSchemaVersion)
    return f.Error("schema_version", "unsupported schema version " +
                                         std::to_string(m.schema_version) +
                                         " (this reader knows 1 to " +
                                         std::to_string(kManifestSchemaVersion) + ")");
  std::vector<std::string> fields = {
      "schema_version", "name", "version", "platform", "entry_point", "method", "inputs",
      "outputs", "max_batch_size", "batching", "instance_count", "max_queue_size",
      "max_execution_seconds", "default_timeout_microseconds", "device", "description",
      "streaming", "response_cache", "sequence_batching", "openai"};
  if (m.schema_version >= 2) fields.push_back("packaged_with");
  MANYPY_RETURN_IF_ERROR(f.Only(fields));
  if (m.schema_version >= 2) MANYPY_RETURN_IF_ERROR(ParsePackagedWith(f, &m.packaged_with));
  MANYPY_RETURN_IF_ERROR(f.String("name", true, &m.name));
  if (!Charset(m.name, 128, "_.-") || m.name[0] == '.')
    return f.Error("name", "'" + m.name +
                               "' is not 1-128 characters of [A-Za-z0-9_.-] "
                               "not starting with '.'");
  MANYPY_RETURN_IF_ERROR(f.Int("version", true, &m.version));
  if (m.version < 1) return f.Error("version", "must be >= 1, got " + std::to_string(m.version));
  MANYPY_RETURN_IF_ERROR(f.String("platform", true, &m.platform));
  if (m.platform != kPythonPlatform && m.platform != kTorchScriptPlatform &&
      m.platform != kAotiPlatform)
    return f.Error("platform", "unknown platform '" + m.platform + "' (expected " +
                                   kPythonPlatform + ", " + kTorchScriptPlatform + " or " +
                                   kAotiPlatform + ")");
  MANYPY_RETURN_IF_ERROR(ParseEntryPoint(f, &m.entry_point));
  // A TorchScript module is the only thing the torchscript platform runs, an
  // AOTInductor package the only thing torch_aoti runs, and only they can.
  if ((m.platform == kTorchScriptPlatform) != (m.entry_point.kind == "torchscript") ||
      (m.platform == kAotiPlatform) != (m.entry_point.kind == "aoti"))
    return f.Error("entry_point.kind",
                   "kind '" + m.entry_point.kind + "' does not go with platform '" + m.platform +
                       "' (torchscript needs kind torchscript, torch_aoti kind aoti, and only "
                       "they)");
  MANYPY_RETURN_IF_ERROR(f.String("method", false, &m.method));
  if (!Identifier(m.method))
    return f.Error("method", "'" + m.method + "' is not a Python identifier");
  MANYPY_RETURN_IF_ERROR(ParseTensors(f, "inputs", &m.inputs));
  MANYPY_RETURN_IF_ERROR(ParseTensors(f, "outputs", &m.outputs));
  MANYPY_RETURN_IF_ERROR(f.Int("max_batch_size", false, &m.max_batch_size));
  if (m.max_batch_size < 0 || m.max_batch_size > kMaxBatchSize)
    return f.Error("max_batch_size",
                   "must be in 0..65536, got " + std::to_string(m.max_batch_size));
  MANYPY_RETURN_IF_ERROR(ParseBatching(f, &m));
  MANYPY_RETURN_IF_ERROR(f.Int("instance_count", false, &m.instance_count));
  if (m.instance_count < 0)
    return f.Error("instance_count", "must be >= 0 (0 = one per interpreter)");
  for (auto [field, value] : {std::pair{"max_queue_size", &m.max_queue_size},
                              std::pair{"max_execution_seconds", &m.max_execution_seconds},
                              std::pair{"default_timeout_microseconds",
                                        &m.default_timeout_microseconds}}) {
    MANYPY_RETURN_IF_ERROR(f.Int(field, false, value));
    if (*value < 0) return f.Error(field, "must be >= 0 (0 = the server's default)");
  }
  MANYPY_RETURN_IF_ERROR(f.String("device", false, &m.device));
  const bool cuda_n = m.device.rfind("cuda:", 0) == 0 && m.device.size() > 5 &&
                      std::all_of(m.device.begin() + 5, m.device.end(),
                                  [](unsigned char c) { return std::isdigit(c); });
  if (m.device != "cpu" && m.device != "cuda" && !cuda_n)
    return f.Error("device", "unknown device '" + m.device + "' (expected cpu, cuda or cuda:N)");
  MANYPY_RETURN_IF_ERROR(f.String("description", false, &m.description));
  MANYPY_RETURN_IF_ERROR(f.Bool("streaming", &m.streaming));
  MANYPY_RETURN_IF_ERROR(f.Bool("response_cache", &m.response_cache));
  std::string problem = StreamingProblem(m);
  if (!problem.empty()) return f.Error("streaming", problem);
  MANYPY_RETURN_IF_ERROR(ParseSequenceBatching(f, &m));
  MANYPY_RETURN_IF_ERROR(ParseOpenAi(f, &m));
  return m;
}

Status CheckPackagedTorch(const Manifest& manifest, const std::string& server_torch,
                          const std::string& archive_for_errors) {
  const PackagedWith& p = manifest.packaged_with;
  if (p.torch.empty()) return Status::Ok();  // schema version 1: nothing recorded
  auto archive = MajorMinor(p.torch);
  auto server = MajorMinor(server_torch);
  if (archive.first < 0 || server.first < 0 || archive <= server) return Status::Ok();
  return FailedPrecondition(archive_for_errors + ": packaged with PyTorch " + p.torch +
                            " (Python " + p.python + ", manypy " + p.manypy +
                            "), but this server runs PyTorch " + server_torch +
                            ": an archive needs a PyTorch at least as new as the one it was "
                            "packaged with (repackage it under PyTorch " + server_torch +
                            ", or serve it from a newer manypy image)");
}

namespace {

// "2.6.0" of "2.6.0+debian" or "2.6.0a0+git1234"; "" when it does not start with N.N.N.
std::string ReleaseOf(const std::string& v) {
  int major = -1, minor = -1, patch = -1;
  if (sscanf(v.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) return "";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

Status CheckCompiledTorch(const Manifest& manifest, const std::string& server_torch,
                          const std::string& archive_for_errors) {
  const std::string& compiled = manifest.packaged_with.torch;
  if (compiled.empty())
    return FailedPrecondition(archive_for_errors +
                              ": a torch_aoti archive must record the PyTorch it was compiled "
                              "with (packaged_with, schema version 2); repackage it with "
                              "manypy-package create --format aoti");
  const std::string release = ReleaseOf(compiled);
  if (!release.empty() && release == ReleaseOf(server_torch)) return Status::Ok();
  return FailedPrecondition(archive_for_errors + ": compiled by AOTInductor under PyTorch " +
                            compiled + ", but this server runs PyTorch " + server_torch +
                            ": a compiled package runs only under the PyTorch release it was "
                            "compiled with (repackage it with --format aoti under PyTorch " +
                            server_torch + ", or serve it on the Python or TorchScript platform)");
}

bool IsValidDatatype(const std::string& datatype) { return FindDatatype(datatype) != nullptr; }

int64_t DatatypeByteSize(const std::string& datatype) {
  const DatatypeInfo* d = FindDatatype(datatype);
  return d == nullptr || d->wire_size == 0 ? -1 : static_cast<int64_t>(d->wire_size);
}

}  // namespace manypy
