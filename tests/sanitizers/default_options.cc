// The sanitizer runtimes' default options for the sanitizer builds
// (cmake/Sanitizers.cmake, docs/testing.md#sanitizers): compiled into each test
// executable and manypy-server there, so a plain `ctest` in build-tsan or
// build-asan behaves as `make test-tsan` / `make test-asan`. The runtimes call
// these before main, once; TSAN_OPTIONS, ASAN_OPTIONS, UBSAN_OPTIONS and
// LSAN_OPTIONS set in the environment still override them.
// MANYPY_SANITIZER_DIR is this folder (tests/sanitizers), set by the build.

extern "C" {

// A report fails the test: the first race ends the process with an error
// status; suppressions only for third-party races, each with its reason there.
const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:history_size=4"
         ":suppressions=" MANYPY_SANITIZER_DIR "/tsan_suppressions.txt";
}

// detect_leaks stays on; the leaks inside CPython and libtorch at exit are
// named, with why, in lsan_suppressions.txt.
const char* __asan_default_options() { return "halt_on_error=1"; }

const char* __lsan_default_options() {
  return "suppressions=" MANYPY_SANITIZER_DIR "/lsan_suppressions.txt:print_suppressions=0";
}

const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

}  // extern "C"
