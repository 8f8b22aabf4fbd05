# tests/fuzz_data.cmake - libFuzzer targets for the data readers (IDX, CSV,
# raw, text), built with clang straight from runtime/data/*.c and run briefly under
# CTest.  Without clang, or with GR_FUZZ=OFF, there are no such tests.
find_program(GR_FZD_CLANG clang)
if(GR_FUZZ AND GR_FZD_CLANG)
  set(GR_FZD_SRC ${PROJECT_SOURCE_DIR})
  set(GR_FZD_READERS
      ${GR_FZD_SRC}/runtime/data/data.c ${GR_FZD_SRC}/runtime/data/data_idx.c
      ${GR_FZD_SRC}/runtime/data/data_csv.c ${GR_FZD_SRC}/runtime/data/data_raw.c
      ${GR_FZD_SRC}/runtime/data/data_set.c ${GR_FZD_SRC}/runtime/data/data_text.c)
  set(GR_FZD_HEADERS
      ${GR_FZD_SRC}/runtime/data/data.h ${GR_FZD_SRC}/runtime/data/data_impl.h
      ${GR_FZD_SRC}/tests/fuzz/fuzz_data.h)
  set(GR_FZD_COMMON ${GR_FZD_SRC}/tests/fuzz/fuzz_data_common.c)
  set(GR_FZD_RUNS_idx 6000)
  set(GR_FZD_RUNS_csv 20000)
  set(GR_FZD_RUNS_raw 15000)
  set(GR_FZD_RUNS_text 15000)
  foreach(fmt idx csv raw text)
    set(name fuzz_data_${fmt})
    set(bin ${CMAKE_CURRENT_BINARY_DIR}/${name})
    add_custom_command(
      OUTPUT ${bin}
      COMMAND ${GR_FZD_CLANG} -std=c11 -g -O1 -D_GNU_SOURCE
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
              -I${GR_FZD_SRC} ${GR_FZD_SRC}/tests/fuzz/${name}.c ${GR_FZD_COMMON}
              ${GR_FZD_READERS} -lz -lpthread -lm -o ${bin}
      DEPENDS ${GR_FZD_SRC}/tests/fuzz/${name}.c ${GR_FZD_COMMON} ${GR_FZD_READERS}
              ${GR_FZD_HEADERS}
      COMMENT "Building libFuzzer target ${name} with clang"
      VERBATIM)
    add_custom_target(${name} ALL DEPENDS ${bin})
    # The fuzzer adds inputs to its corpus dir: it runs on a copy in the
    # build tree so the source tree is never written during tests.
    set(corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus_data_${fmt})
    add_test(NAME ${name}_setup
             COMMAND ${CMAKE_COMMAND} -E copy_directory
                     ${GR_FZD_SRC}/tests/fuzz/corpus_data_${fmt} ${corpus})
    # Each run opens a reader and so starts and joins its read-ahead
    # thread; IDX is the slowest (zlib buffers, two opens per file).  The
    # counts keep each test to a few seconds.
    add_test(NAME ${name}
             COMMAND ${bin} -runs=${GR_FZD_RUNS_${fmt}} -max_len=4096 -timeout=10
                     -dict=${GR_FZD_SRC}/tests/fuzz/fuzz_data_${fmt}.dict ${corpus})
    set_tests_properties(${name}_setup PROPERTIES FIXTURES_SETUP fuzz_data_${fmt}_corpus)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED fuzz_data_${fmt}_corpus TIMEOUT 300)
  endforeach()
endif()
