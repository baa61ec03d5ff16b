// FUZZ_CHECK: the targets' assertion. A broken property aborts, so libFuzzer reports it as a
// crash and keeps the input; the message says which property. Stateless; thread-safe.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition, ...)                                              \
  do {                                                                          \
    if (!(condition)) {                                                         \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, \
                   #condition);                                                 \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fputc('\n', stderr);                                                 \
      std::abort();                                                             \
    }                                                                           \
  } while (0)
