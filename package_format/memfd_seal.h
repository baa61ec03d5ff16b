// SealAgainstChanges: seals an in-memory file (memfd) so that nothing, this
// process included, can write, grow or shrink it again, waiting out the
// moments when the kernel cannot seal it yet. Thread-safe (one memfd per call).
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

/// Adds F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE and F_SEAL_SEAL to `memfd`
/// (made with MFD_ALLOW_SEALING; it must have no shared writable mapping).
/// F_SEAL_WRITE refuses while some page of the file has a reference beyond
/// the page cache's and its mappings' (a pipe's, a copy's in flight, the
/// kernel's own housekeeping): the kernel drains its per-core page batches,
/// waits about 150 ms, then answers EBUSY. Such a reference is let go
/// within moments, so EBUSY is retried, after pauses that double from 1 ms
/// (10 tries, about 2 s in all), before failing. Errors are INTERNAL and
/// name `what` (the file the memfd copies).
Status SealAgainstChanges(int memfd, const std::string& what);

}  // namespace manypy
