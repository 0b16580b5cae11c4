// scenario tests: see tests/CMakeLists.txt
