// estimate tests: see tests/CMakeLists.txt
