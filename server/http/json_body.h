// ParseJsonBody: every JSON body the HTTP frontend reads goes through here.
// The parser is rapidjson's iterative one (no recursion, whatever the input),
// and it stops at the first value nested deeper than kMaxJsonDepth, before
// building it, so a hostile body costs at most its own length in parser state
// and never the thread's stack. Pure; thread-safe.
#pragma once

#include <rapidjson/document.h>

#include <string_view>

#include "common/json_limits.h"
#include "common/status.h"

namespace manypy {

/// Flags for ParseJsonBody beyond the fixed ones (iterative parsing).
enum class JsonNumbers { kStrict, kAllowNanAndInfinity };

/// Parses `text` into `*doc`. A malformed or too deeply nested body is
/// InvalidArgument: "<what> is not valid JSON: <reason> at offset N", the
/// depth one naming kMaxJsonDepth. On error `*doc` is null.
Status ParseJsonBody(std::string_view text, std::string_view what, rapidjson::Document* doc,
                     JsonNumbers numbers = JsonNumbers::kStrict);

}  // namespace manypy
