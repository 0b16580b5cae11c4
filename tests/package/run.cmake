# ctest script (cmake -P): `cmake --install` the build tree into a temporary prefix, then
# configure, build and run tests/package (find_package(stepcast), links stepcast::models).
# -D BUILD_DIR=<stepcast build> -D SOURCE_DIR=<tests/package> -D WORK_DIR=<scratch>
# -D CXX=<compiler> -D GENERATOR=<generator> [-D CONFIG=<config>]
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(config_args "")
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
run("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("run the consumer" ${WORK_DIR}/build/consumer)
# llama3-70b: 70,553,706,496 parameters (derived in tests/models/params_test.cc).
if(NOT last_output STREQUAL "llama3-70b 70553706496\n")
  message(FATAL_ERROR "consumer printed: ${last_output}")
endif()
foreach(f bin/stepcast include/stepcast/models/params.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "${prefix}/${f} was not installed")
  endif()
endforeach()
message(STATUS "installed package used by tests/package: ${last_output}")
file(REMOVE_RECURSE ${WORK_DIR})
