# tests/fuzz.cmake - libFuzzer target for the parser, built with clang and
# run briefly under CTest.  Needs clang (for -fsanitize=fuzzer); without it
# there is no fuzz test.
find_program(GR_CLANG clang)
if(NOT GR_FUZZ)
  message(STATUS "graphrun: parser fuzzer disabled (GR_FUZZ=OFF)")
elseif(NOT GR_CLANG)
  message(STATUS "graphrun: clang not found, parser fuzzer not built")
else()
  set(GR_FUZZ_SRC ${PROJECT_SOURCE_DIR})
  file(GLOB GR_FUZZ_LANG CONFIGURE_DEPENDS ${GR_FUZZ_SRC}/lang/*.c)
  set(GR_FUZZ_GEN ${CMAKE_BINARY_DIR}/lang/parser.c ${CMAKE_BINARY_DIR}/lang/lexer.c)
  set(GR_FUZZ_BIN ${CMAKE_CURRENT_BINARY_DIR}/fuzz_parser)
  add_custom_command(
    OUTPUT ${GR_FUZZ_BIN}
    COMMAND ${GR_CLANG} -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined
            -fno-sanitize-recover=undefined
            -I${GR_FUZZ_SRC} -I${GR_FUZZ_SRC}/lang -I${CMAKE_BINARY_DIR}/lang
            ${GR_FUZZ_SRC}/tests/fuzz/fuzz_parser.c ${GR_FUZZ_LANG} ${GR_FUZZ_GEN}
            -o ${GR_FUZZ_BIN}
    DEPENDS ${GR_FUZZ_SRC}/tests/fuzz/fuzz_parser.c ${GR_FUZZ_LANG} ${GR_FUZZ_GEN}
            ${GR_FUZZ_SRC}/lang/ast.h ${GR_FUZZ_SRC}/lang/diag.h ${GR_FUZZ_SRC}/lang/ps_internal.h
    COMMENT "Building libFuzzer target fuzz_parser with clang"
    VERBATIM)
  add_custom_target(fuzz_parser ALL DEPENDS ${GR_FUZZ_BIN})
  # The fuzzer adds new inputs to its corpus dir: give it a copy in the build
  # tree so the source tree is never written during tests.
  set(GR_FUZZ_CORPUS ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus_parser)
  add_test(NAME fuzz_parser_setup
           COMMAND ${CMAKE_COMMAND} -E copy_directory
                   ${GR_FUZZ_SRC}/tests/fuzz/corpus_parser ${GR_FUZZ_CORPUS})
  add_test(NAME fuzz_parser
           COMMAND ${GR_FUZZ_BIN} -runs=20000 -max_len=4096 -timeout=10 ${GR_FUZZ_CORPUS})
  set_tests_properties(fuzz_parser_setup PROPERTIES FIXTURES_SETUP fuzz_corpus)
  set_tests_properties(fuzz_parser PROPERTIES FIXTURES_REQUIRED fuzz_corpus TIMEOUT 600)
endif()
