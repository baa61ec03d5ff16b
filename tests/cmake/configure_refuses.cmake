# cmake -DSOURCE=... -DBINARY=... -DTORCH_DIR=... -DEXPECT=... -P configure_refuses.cmake
# Configures SOURCE against the libtorch in TORCH_DIR and passes only if the
# configure fails with a message containing EXPECT.
file(REMOVE_RECURSE "${BINARY}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" "-DTorch_DIR=${TORCH_DIR}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${BINARY}")
if(rc EQUAL 0)
  message(FATAL_ERROR "configure against ${TORCH_DIR} succeeded; expected it to refuse:\n${out}")
endif()
string(REPLACE "\n" " " flat "${err}")
string(REGEX REPLACE " +" " " flat "${flat}")
string(FIND "${flat}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "configure failed without the expected message '${EXPECT}':\n${err}")
endif()
message(STATUS "refused as expected: ${EXPECT}")
