# One fuzz target's run (tests/fuzz/CMakeLists.txt, `make fuzz`):
#   MODE=fuzz     a bounded run (SECONDS) starting from SEEDS and REGRESSIONS; new inputs go
#                 to a fresh corpus under WORK, never into the source tree
#   MODE=regress  every file of SEEDS and REGRESSIONS run once, no fuzzing
# DICT (optional): a libFuzzer dictionary, passed with -dict= when the file exists.
# SUMMARY (optional, fuzz mode): libFuzzer's output goes to WORK/fuzz.log instead of the
# console, and one line is appended to SUMMARY: target, seconds, executions per second
# (from -print_final_stats), executions, the corpus at the end (inputs/bytes, and the
# files the run added), result.
# A crash, sanitizer report, FUZZ_CHECK failure, timeout or out-of-memory fails the run;
# libFuzzer writes the input that did it to WORK/artifacts/ (keep it in REGRESSIONS once fixed).
# cmake -DFUZZER=... -DMODE=... -DSEEDS=... -DREGRESSIONS=... -DWORK=... [-DSECONDS=15]
#       [-DDICT=...] [-DSUMMARY=...] -P this
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
if(DEFINED DICT AND EXISTS "${DICT}")
  list(APPEND limits -dict=${DICT})
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)

if(MODE STREQUAL "fuzz")
  set(inputs ${WORK}/corpus ${SEEDS})
  if(IS_DIRECTORY ${REGRESSIONS})
    list(APPEND inputs ${REGRESSIONS})
  endif()
  set(log)
  if(DEFINED SUMMARY)
    set(log OUTPUT_FILE ${WORK}/fuzz.log ERROR_FILE ${WORK}/fuzz.log)
  endif()
  execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -print_final_stats=1 ${limits}
                          -artifact_prefix=${WORK}/artifacts/ ${inputs}
                  RESULT_VARIABLE result ${log})
  if(DEFINED SUMMARY)
    file(READ ${WORK}/fuzz.log text)
    set(rate "?")
    set(runs "?")
    if(text MATCHES "stat::average_exec_per_sec: *([0-9]+)")
      set(rate ${CMAKE_MATCH_1})
    endif()
    if(text MATCHES "stat::number_of_executed_units: *([0-9]+)")
      set(runs ${CMAKE_MATCH_1})
    endif()
    set(units "?")
    string(REGEX MATCHALL "corp: [0-9]+/[0-9]+[bKM]?b" corps "${text}")
    if(corps)
      list(GET corps -1 units)
      string(REPLACE "corp: " "" units "${units}")
    endif()
    file(GLOB corpus ${WORK}/corpus/*)
    list(LENGTH corpus corpus_files)
    if(result EQUAL 0)
      set(verdict clean)
    else()
      set(verdict "FAILED (${result}; ${WORK}/fuzz.log, ${WORK}/artifacts/)")
    endif()
    get_filename_component(name ${FUZZER} NAME)
    string(REGEX REPLACE "_fuzzer$" "" name "${name}")
    set(line "${name}\t${SECONDS} s\t${rate} exec/s\t${runs} runs\tcorpus ${units} (${corpus_files} new files)\t${verdict}")
    file(APPEND ${SUMMARY} "${line}\n")
    message(STATUS "${line}")
  endif()
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
