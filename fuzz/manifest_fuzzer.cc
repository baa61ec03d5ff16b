// Fuzzes the manifest parser: any text is parsed; a manifest it accepts must survive
// ManifestToJson and parse back equal (the writer's documented promise), and a refusal
// must be INVALID_ARGUMENT naming the archive; a manifest nested past the JSON limit is
// refused naming it, and none within it is. Mutations include deep repeats (deep_inputs.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "package_format/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace manypy;
  const std::string text(reinterpret_cast<const char*>(data), size);
  StatusOr<Manifest> parsed = ParseManifest(text, "fuzz.mpk");
  fuzz::CheckDepthVerdict(parsed.status(), fuzz::NlohmannJsonDepth(text), "fuzz.mpk: manifest");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == StatusCode::kInvalidArgument, "%s",
               parsed.status().ToString().c_str());
    FUZZ_CHECK(parsed.status().message().rfind("fuzz.mpk: ", 0) == 0,
               "error does not name the archive: %s", parsed.status().message().c_str());
    return 0;
  }
  const std::string written = ManifestToJson(*parsed);
  StatusOr<Manifest> again = ParseManifest(written, "fuzz.mpk");
  FUZZ_CHECK(again.ok(), "the writer's output does not parse: %s\n%s",
             again.status().ToString().c_str(), written.c_str());
  FUZZ_CHECK(*again == *parsed, "round trip changed the manifest:\n%s", written.c_str());
  return 0;
}
