# libFuzzer targets (fuzz/) need clang: they are built as a project of their
# own (ExternalProject, build/fuzz) when clang++ links -fsanitize=fuzzer,
# and each runs as a bounded ctest, fuzz.<target>: the committed corpus
# (regression inputs included) is replayed, then the target fuzzes for 20 s.
# Without such a clang the tests report themselves skipped.
set(troupe_fuzz_targets store_protocol control_messages host_plan discovery_output)
set(troupe_fuzz_seconds 20)

find_program(TROUPE_FUZZ_CXX NAMES clang++ clang++-14)
set(troupe_fuzz_ok FALSE)
if(TROUPE_FUZZ_CXX)
  set(probe ${CMAKE_BINARY_DIR}/fuzz-probe)
  file(WRITE ${probe}.cpp "#include <cstddef>\n#include <cstdint>\n"
       "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(
    COMMAND ${TROUPE_FUZZ_CXX} -fsanitize=fuzzer,address,undefined ${probe}.cpp -o ${probe}
    RESULT_VARIABLE probe_failed OUTPUT_QUIET ERROR_QUIET)
  if(NOT probe_failed)
    set(troupe_fuzz_ok TRUE)
  endif()
endif()

if(troupe_fuzz_ok)
  include(ExternalProject)
  ExternalProject_Add(fuzz_targets
    SOURCE_DIR ${CMAKE_SOURCE_DIR}/fuzz
    BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz
    CMAKE_ARGS -G ${CMAKE_GENERATOR} -DCMAKE_CXX_COMPILER=${TROUPE_FUZZ_CXX}
               -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
               -DTROUPE_SOURCE_DIR=${CMAKE_SOURCE_DIR}
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON)
endif()

foreach(target ${troupe_fuzz_targets})
  if(troupe_fuzz_ok)
    add_test(NAME fuzz.${target}
      COMMAND sh ${CMAKE_SOURCE_DIR}/fuzz/run_fuzzer.sh ${CMAKE_BINARY_DIR}/fuzz/${target}_fuzzer
              ${CMAKE_SOURCE_DIR}/fuzz/corpus/${target} ${CMAKE_BINARY_DIR}/fuzz-work/${target}
              ${troupe_fuzz_seconds})
  else()
    add_test(NAME fuzz.${target}
      COMMAND sh -c "echo 'no clang++ that links -fsanitize=fuzzer (scripts/setup.sh installs it)'; exit 77")
  endif()
  set_tests_properties(fuzz.${target} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
endforeach()
