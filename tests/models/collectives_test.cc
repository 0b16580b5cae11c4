// collectives tests: see tests/CMakeLists.txt
