# Sanitizer builds (docs/testing.md#sanitizers): -DMANYPY_SANITIZE=thread or
# -DMANYPY_SANITIZE=address (AddressSanitizer with UndefinedBehaviorSanitizer),
# configured with clang in a folder of their own (make test-tsan / make test-asan
# use build-tsan and build-asan). Every target of this project is instrumented;
# libtorch, CPython, gRPC and the other Debian libraries stay the system's
# (uninstrumented) shared libraries. -O1 with line tables: quick to compile on
# 2 cores, fast enough to run the suites, stack traces that name lines.
# Included by the top-level CMakeLists.txt before any target.
set(MANYPY_SANITIZE "" CACHE STRING
  "sanitizer build: empty (none), thread (ThreadSanitizer) or address (ASan + UBSan); needs clang")
set_property(CACHE MANYPY_SANITIZE PROPERTY STRINGS "" thread address)

# manypy_sanitizer_options(TARGET [SERVER]): the sanitizer runtimes' default options
# and suppressions (tests/sanitizers/) linked into an executable of a sanitizer
# build; nothing otherwise. One object per kind, compiled once. SERVER: for
# manypy-serving, whose leak check at exit is off (default_options.cc says why).
function(manypy_sanitizer_options target)
  if(NOT MANYPY_SANITIZE)
    return()
  endif()
  cmake_parse_arguments(ARG "SERVER" "" "" ${ARGN})
  set(options manypy_sanitizer_options)
  set(server 0)
  if(ARG_SERVER)
    set(options manypy_sanitizer_options_server)
    set(server 1)
  endif()
  if(NOT TARGET ${options})
    add_library(${options} OBJECT ${PROJECT_SOURCE_DIR}/tests/sanitizers/default_options.cc)
    target_compile_definitions(${options} PRIVATE
      MANYPY_SANITIZER_DIR="${PROJECT_SOURCE_DIR}/tests/sanitizers" MANYPY_SANITIZER_SERVER=${server})
  endif()
  target_link_libraries(${target} PRIVATE ${options})
endfunction()

if(MANYPY_SANITIZE STREQUAL "")
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "manypy: MANYPY_SANITIZE=${MANYPY_SANITIZE} needs clang: configure with "
    "-DCMAKE_CXX_COMPILER=clang++ (Debian: clang, libclang-rt-14-dev), as make test-tsan and "
    "make test-asan do")
endif()
if(MANYPY_SANITIZE STREQUAL "thread")
  set(_manypy_sanitizers thread)
elseif(MANYPY_SANITIZE STREQUAL "address")
  set(_manypy_sanitizers address,undefined)
else()
  message(FATAL_ERROR "manypy: MANYPY_SANITIZE must be empty, thread or address, "
    "not '${MANYPY_SANITIZE}'")
endif()
message(STATUS "manypy: sanitizer build: -fsanitize=${_manypy_sanitizers}")

# A finding fails the test: UB aborts rather than printing and going on.
add_compile_options(-O1 -gline-tables-only -fno-omit-frame-pointer
  -fsanitize=${_manypy_sanitizers} -fno-sanitize-recover=all)
add_link_options(-fsanitize=${_manypy_sanitizers})
if(MANYPY_SANITIZE STREQUAL "address")
  # The same third-party header checks the fuzz targets skip, each with its reason there.
  add_compile_options(-fsanitize-ignorelist=${CMAKE_SOURCE_DIR}/fuzz/ubsan_ignorelist.txt)
endif()
# ASan and TSan bring their own malloc: gperftools' tcmalloc stays out (server/CMakeLists.txt).
set(MANYPY_TCMALLOC OFF CACHE BOOL "link manypy-server with gperftools' tcmalloc" FORCE)
