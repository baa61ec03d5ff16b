#include "common/thread_name.h"

#include <pthread.h>

#include <cstdio>

namespace manypy {

void NameThisThread(const char* name) {
  char truncated[16];  // pthread_setname_np refuses longer names outright
  snprintf(truncated, sizeof(truncated), "%s", name);
  pthread_setname_np(pthread_self(), truncated);
}

}  // namespace manypy
