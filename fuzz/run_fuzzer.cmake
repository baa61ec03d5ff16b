# One fuzz target's CTest run (tests/fuzz/CMakeLists.txt):
#   MODE=fuzz     a bounded run (SECONDS) starting from SEEDS and REGRESSIONS; new inputs go
#                 to a fresh corpus under WORK, never into the source tree
#   MODE=regress  every file of SEEDS and REGRESSIONS run once, no fuzzing
# A crash, sanitizer report, FUZZ_CHECK failure, timeout or out-of-memory fails the test;
# libFuzzer writes the input that did it to WORK/artifacts/ (keep it in REGRESSIONS once fixed).
# cmake -DFUZZER=... -DMODE=... -DSEEDS=... -DREGRESSIONS=... -DWORK=... [-DSECONDS=15] -P this
foreach(var FUZZER MODE SEEDS REGRESSIONS WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake needs -D${var}=...")
  endif()
endforeach()
if(NOT DEFINED SECONDS)
  set(SECONDS 15)
endif()
# Per-input limits well above what any input needs on a slow, busy machine: an input past
# them is a real finding (a hang or a memory blow-up on hostile input), not noise.
set(limits -timeout=60 -rss_limit_mb=2560 -malloc_limit_mb=2048)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)

if(MODE STREQUAL "fuzz")
  set(inputs ${WORK}/corpus ${SEEDS})
  if(IS_DIRECTORY ${REGRESSIONS})
    list(APPEND inputs ${REGRESSIONS})
  endif()
  execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -print_final_stats=1 ${limits}
                          -artifact_prefix=${WORK}/artifacts/ ${inputs}
                  RESULT_VARIABLE result)
elseif(MODE STREQUAL "regress")
  file(GLOB files ${SEEDS}/* ${REGRESSIONS}/*)
  if(NOT files)
    message(FATAL_ERROR "no inputs in ${SEEDS} or ${REGRESSIONS}")
  endif()
  list(LENGTH files count)
  message(STATUS "running ${count} inputs")
  execute_process(COMMAND ${FUZZER} ${limits} -artifact_prefix=${WORK}/artifacts/ ${files}
                  RESULT_VARIABLE result)
else()
  message(FATAL_ERROR "MODE must be fuzz or regress, not '${MODE}'")
endif()
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${result}); the input that did it is in "
    "${WORK}/artifacts/")
endif()
