// memory tests: see tests/CMakeLists.txt
