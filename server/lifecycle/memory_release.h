// ReturnFreeMemoryToSystem: hands the memory the allocator holds free back to
// the kernel, so that the resident size falls once a model is unloaded (not
// at some later allocation). Thread-safe.
#pragma once

namespace manypy {

/// tcmalloc (gperftools, which manypy-server links): ReleaseFreeMemory, every
/// free page of its page heap (what its per-thread and central caches hold in
/// small objects stays). glibc's malloc: malloc_trim(0), the top of every
/// arena. Takes a few milliseconds; call it after an unload, not per request.
void ReturnFreeMemoryToSystem();

}  // namespace manypy
