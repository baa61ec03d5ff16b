// NameThisThread: names the calling thread for top -H, perf and gdb.
// Thread-safe (each thread names itself).
#pragma once

namespace manypy {

/// Names the calling thread; Linux keeps the first 15 characters.
void NameThisThread(const char* name);

}  // namespace manypy
