// The sanitizer runtimes' default options for the sanitizer builds
// (cmake/Sanitizers.cmake, docs/testing.md#sanitizers): compiled into each test
// executable and the server's two there, so a plain `ctest` in build-tsan or
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

// Tests: detect_leaks on (ASan's default), with the suppressions below.
// manypy-serving (MANYPY_SANITIZER_SERVER): off. At exit its heap holds each
// interpreter's CPython runtime and libtorch's registrations, kept on purpose
// until the process ends; LeakSanitizer's scan and symbolizing of that took
// longer than the 30 s shutdown grace period in every server_e2e_test case
// (each failed with "shutdown did not finish within the grace period"), and
// the interpreter copies' libraries cannot be symbolized (their files are gone).
// Use-after-free, overflows and UB in the server are still checked.
const char* __asan_default_options() {
#if MANYPY_SANITIZER_SERVER
  return "halt_on_error=1:detect_leaks=0";
#else
  return "halt_on_error=1";
#endif
}

const char* __lsan_default_options() {
  return "suppressions=" MANYPY_SANITIZER_DIR "/lsan_suppressions.txt:print_suppressions=0";
}

const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

}  // extern "C"
