// ReturnFreeMemoryToSystem: hands the memory the allocator holds free back to
// the kernel, so that the resident size falls once a model is unloaded (not
// at some later allocation). Thread-safe.
#pragma once

#include <cstdint>

namespace manypy {

/// tcmalloc (gperftools, which manypy-server links): ReleaseFreeMemory, every
/// free page of its page heap (what its per-thread and central caches hold in
/// small objects stays). glibc's malloc: malloc_trim(0), the top of every
/// arena. Takes a few milliseconds; call it after an unload, not per request.
void ReturnFreeMemoryToSystem();

/// Bytes the allocator holds free and could return: tcmalloc's page heap free
/// bytes; glibc's free bytes in its arenas (mallinfo2's fordblks). Cheap: no
/// lock held for long, no system call.
int64_t FreeBytesHeld();

/// Returns about `bytes` of what FreeBytesHeld counts (tcmalloc: ReleaseToSystem;
/// glibc cannot aim, and trims every arena).
void ReturnFreeBytes(int64_t bytes);

}  // namespace manypy
