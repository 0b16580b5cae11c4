// params tests: see tests/CMakeLists.txt
