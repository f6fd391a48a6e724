# libFuzzer targets for every parser (fuzz/fuzz_*.c), built only with -DUFP4_FUZZ=ON and clang.
# The library is compiled a second time with the fuzzer's coverage hooks and ASan+UBSan into
# ufp4fuzzlib, so the normal ufp4lib stays uninstrumented; each target links with
# -fsanitize=fuzzer, which supplies main(). UBSan does not recover, so UB is a crash the fuzzer
# reports with its input.
option(UFP4_FUZZ "Build the libFuzzer targets in fuzz/ (clang only)" OFF)
if(UFP4_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "UFP4_FUZZ needs clang (configure with -DCMAKE_C_COMPILER=clang)")
  endif()
  set(UFP4_FUZZ_SAN -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_library(ufp4fuzzlib STATIC ${UFP4_LIB_SOURCES})
  target_include_directories(ufp4fuzzlib PUBLIC ${PROJECT_SOURCE_DIR}/include
                             PRIVATE ${PROJECT_SOURCE_DIR}/src ${UFP4_GENERATED_DIR})
  add_dependencies(ufp4fuzzlib ufp4_build_commit) # core/build_info.c includes the generated header
  target_compile_options(ufp4fuzzlib PRIVATE -fsanitize=fuzzer-no-link ${UFP4_FUZZ_SAN})
  target_link_libraries(ufp4fuzzlib PUBLIC OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::OPENBLAS
                        PkgConfig::LIBCRYPTO m)
  if(UFP4_X86)
    target_compile_definitions(ufp4fuzzlib PRIVATE UFP4_HAVE_X86=1)
  endif()
  file(GLOB UFP4_FUZZ_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/fuzz_*.c)
  set(UFP4_FUZZ_TARGETS "")
  foreach(src ${UFP4_FUZZ_SOURCES})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/fuzz)
    target_compile_definitions(${name} PRIVATE _GNU_SOURCE) # memfd_create
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer ${UFP4_FUZZ_SAN})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer ${UFP4_FUZZ_SAN})
    target_link_libraries(${name} PRIVATE ufp4fuzzlib)
    list(APPEND UFP4_FUZZ_TARGETS ${name})
  endforeach()
  add_custom_target(fuzz_all DEPENDS ${UFP4_FUZZ_TARGETS})
endif()
