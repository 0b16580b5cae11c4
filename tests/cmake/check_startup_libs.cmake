# ctest script (cmake -P): the `stepcast` binary must not pull in the libraries only some
# commands need (issue 14: start-up time and memory). Two checks:
#   1. readelf -d: no NEEDED entry matches FORBIDDEN;
#   2. LD_DEBUG=files while running `stepcast presets`: no library matching FORBIDDEN is
#      loaded at all (catches transitive dependencies too).
# -D STEPCAST_BIN=<path> -D READELF=<path> -D FORBIDDEN=<regex, e.g. simgrid|ns3>
foreach(v STEPCAST_BIN READELF FORBIDDEN)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_startup_libs.cmake: -D ${v}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -d ${STEPCAST_BIN} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${STEPCAST_BIN} failed (${rc})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]*\\]" needed "${dyn}")
set(bad "")
foreach(line IN LISTS needed)
  string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" lib "${line}")
  if(lib MATCHES "${FORBIDDEN}")
    list(APPEND bad ${lib})
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "${STEPCAST_BIN} links ${bad} (NEEDED); these must be loaded at run time by the "
                      "command that needs them, not by every command")
endif()

set(ENV{LD_DEBUG} files)
execute_process(COMMAND ${STEPCAST_BIN} presets OUTPUT_QUIET ERROR_VARIABLE trace RESULT_VARIABLE rc)
unset(ENV{LD_DEBUG})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "`${STEPCAST_BIN} presets` exited ${rc}")
endif()
string(REGEX MATCHALL "file=[^ \t\n]+" loaded "${trace}")
list(REMOVE_DUPLICATES loaded)
set(bad "")
foreach(f IN LISTS loaded)
  if(f MATCHES "${FORBIDDEN}")
    list(APPEND bad ${f})
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "`stepcast presets` loaded ${bad}")
endif()
list(LENGTH loaded n)
message(STATUS "stepcast: no NEEDED or loaded library matches '${FORBIDDEN}' (${n} libraries loaded by `stepcast presets`)")
