# Configures and builds the fuzz targets (fuzz/CMakeLists.txt) with clang under BINARY: the
# CTest fixture fuzz_build runs it (cmake -DSOURCE=... -DBINARY=... -DCXX=... -P this file),
# so a plain `make test` builds them from a clean clone. JOBS (optional) caps the build's
# parallel jobs; GENERATOR is the main build's. Prints how long it took.
foreach(var SOURCE BINARY CXX GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_fuzzers.cmake needs -D${var}=...")
  endif()
endforeach()
string(TIMESTAMP start "%s")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CXX}
                COMMAND_ERROR_IS_FATAL ANY)
set(parallel)
if(JOBS)
  set(parallel --parallel ${JOBS})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} ${parallel} COMMAND_ERROR_IS_FATAL ANY)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message(STATUS "fuzz targets configured and built in ${seconds} s (${BINARY})")
