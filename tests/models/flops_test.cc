// flops tests: see tests/CMakeLists.txt
