# The Python package python/ufp4/ (ctypes over libufp4.so, target ufp4_shared) and its tests, under
# Debian's /usr/bin/python3 with python3-numpy and python3-torch (UFP4_SYSTEM_PYTHON3, CMakeLists.txt).
# The torch tests compare against tests/linear_eval.c, which calls the C engine directly.
add_executable(linear_eval tests/linear_eval.c)
target_link_libraries(linear_eval PRIVATE ufp4lib)
set(UFP4_PY_ENV "PYTHONPATH=${PROJECT_SOURCE_DIR}/python;UFP4_LIBRARY=$<TARGET_FILE:ufp4_shared>;UFP4_SOURCE_DIR=${PROJECT_SOURCE_DIR};UFP4_CLI=$<TARGET_FILE:ufp4>;UFP4_LINEAR_EVAL=$<TARGET_FILE:linear_eval>${UFP4_TEST_BLAS_ENV}")
foreach(t python_numpy python_torch python_example)
  add_test(NAME ${t} COMMAND ${UFP4_SYSTEM_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/test_${t}.py)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "${UFP4_PY_ENV}" SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()
# `make install` puts the package at PREFIX/lib/python3/dist-packages/ufp4, two folders below the
# installed libufp4.so, where python/ufp4/_lib.py looks for it (set PYTHONPATH to that folder).
install(DIRECTORY python/ufp4 DESTINATION lib/python3/dist-packages PATTERN __pycache__ EXCLUDE)
