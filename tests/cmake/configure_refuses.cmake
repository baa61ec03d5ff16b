# cmake -DSOURCE=... -DBINARY=... -DTORCH_DIR=... -DEXPECT=... [-DEXTRA=-DX=Y] -P configure_refuses.cmake
# Configures SOURCE against the libtorch in TORCH_DIR and passes only if the
# configure fails with a message containing EXPECT. With EXTRA (one more
# configure option, the override) it passes when the configure's messages
# contain EXPECT, whether or not the configure then goes on to succeed.
file(REMOVE_RECURSE "${BINARY}")
set(extra)
if(EXTRA)
  set(extra "${EXTRA}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" "-DTorch_DIR=${TORCH_DIR}" ${extra}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${BINARY}")
if(rc EQUAL 0 AND NOT EXTRA)
  message(FATAL_ERROR "configure against ${TORCH_DIR} succeeded; expected it to refuse:\n${out}")
endif()
string(REPLACE "\n" " " flat "${err}")
string(REGEX REPLACE " +" " " flat "${flat}")
string(FIND "${flat}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "configure gave no message '${EXPECT}':\n${err}")
endif()
if(EXTRA)
  message(STATUS "said as expected: ${EXPECT}")
else()
  message(STATUS "refused as expected: ${EXPECT}")
endif()
