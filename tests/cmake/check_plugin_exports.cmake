# ctest script (cmake -P): a runtime-loaded plugin exports exactly its factory (its copies of
# stepcast_models / stepcast_sim and of std:: templates must not interpose on the host's).
# -D PLUGIN=<path> -D NM=<path> -D EXPECTED=<symbol>
execute_process(COMMAND ${NM} -D --defined-only ${PLUGIN} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${PLUGIN} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(symbols "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" sym "${line}")
  list(APPEND symbols ${sym})
endforeach()
if(NOT symbols STREQUAL EXPECTED)
  message(FATAL_ERROR "${PLUGIN} exports [${symbols}]; expected only [${EXPECTED}]")
endif()
message(STATUS "${PLUGIN} exports only ${EXPECTED}")
