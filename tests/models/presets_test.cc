// presets tests: see tests/CMakeLists.txt
