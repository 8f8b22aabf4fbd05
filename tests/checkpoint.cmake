# tests/checkpoint.cmake - checkpoints beyond the cmocka test: the loader's
# libFuzzer target, kill -9 crash safety, and a numpy reader of the files.
set(GR_CKPT_SRC ${PROJECT_SOURCE_DIR})

# ---- libFuzzer target for the safetensors parser (clang only) ----
# Only the codec (runtime/ckpt/safetensors.c), its abort path and cJSON are linked:
# no session, no IR.
find_program(GR_CKPT_CLANG clang)
if(GR_FUZZ AND GR_CKPT_CLANG)
  set(GR_CKPT_FUZZ_BIN ${CMAKE_CURRENT_BINARY_DIR}/fuzz_checkpoint)
  add_custom_command(
    OUTPUT ${GR_CKPT_FUZZ_BIN}
    COMMAND ${GR_CKPT_CLANG} -std=c11 -g -O1 -D_GNU_SOURCE
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
            -I${GR_CKPT_SRC} ${CJSON_CFLAGS}
            ${GR_CKPT_SRC}/tests/fuzz/fuzz_checkpoint.c ${GR_CKPT_SRC}/runtime/ckpt/safetensors.c
            ${GR_CKPT_SRC}/base/fatal.c ${CJSON_LDFLAGS} -o ${GR_CKPT_FUZZ_BIN}
    DEPENDS ${GR_CKPT_SRC}/tests/fuzz/fuzz_checkpoint.c ${GR_CKPT_SRC}/runtime/ckpt/safetensors.c
            ${GR_CKPT_SRC}/runtime/ckpt/safetensors.h ${GR_CKPT_SRC}/base/fatal.c
            ${GR_CKPT_SRC}/base/fatal.h
    COMMENT "Building libFuzzer target fuzz_checkpoint with clang"
    VERBATIM)
  add_custom_target(fuzz_checkpoint ALL DEPENDS ${GR_CKPT_FUZZ_BIN})
  # the fuzzer adds inputs to its corpus: it gets a copy in the build tree
  set(GR_CKPT_CORPUS ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus_checkpoint)
  add_test(NAME fuzz_checkpoint_setup
           COMMAND ${CMAKE_COMMAND} -E copy_directory
                   ${GR_CKPT_SRC}/tests/fuzz/corpus_checkpoint ${GR_CKPT_CORPUS})
  add_test(NAME fuzz_checkpoint
           COMMAND ${GR_CKPT_FUZZ_BIN} -runs=20000 -max_len=4096 -timeout=10 ${GR_CKPT_CORPUS})
  set_tests_properties(fuzz_checkpoint_setup PROPERTIES FIXTURES_SETUP fuzz_ckpt_corpus)
  set_tests_properties(fuzz_checkpoint PROPERTIES FIXTURES_REQUIRED fuzz_ckpt_corpus TIMEOUT 600)
endif()

# ---- crash safety: SIGKILL during checkpoint writes, 20 times ----
add_test(NAME checkpoint_crash_kill9
  COMMAND sh ${GR_CKPT_SRC}/tests/checkpoint_crash.sh $<TARGET_FILE:graphrun>
          ${GR_CKPT_SRC}/tests/models/ckpt_crash.graph ${CMAKE_CURRENT_BINARY_DIR}/ckpt_crash)
set_tests_properties(checkpoint_crash_kill9 PROPERTIES TIMEOUT 120)

# ---- CLI: resume and error exits ----
add_test(NAME checkpoint_cli_resume
  COMMAND sh -c "rm -f r.st && $0 $1 --steps 30 --checkpoint r.st --quiet && $0 $1 --steps 50 --restore r.st --checkpoint r.st --log r.jsonl --quiet 2>r.err && grep -q 'resumed from step 30' r.err && tail -n 1 r.jsonl | grep -q '\"steps\":20'"
          $<TARGET_FILE:graphrun> ${GR_CKPT_SRC}/examples/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME checkpoint_cli_errors
  COMMAND sh -c "$0 $1 --steps 1 --restore nosuch.st 2>e1; test $? -eq 1 || exit 1; grep -q 'nosuch.st: cannot open' e1 || exit 1; $0 $1 --steps 1 --checkpoint-every 2; test $? -eq 2 || exit 1; $0 $1 --steps 1 --restore a --init-from b; test $? -eq 2"
          $<TARGET_FILE:graphrun> ${GR_CKPT_SRC}/examples/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

# ---- interop: numpy reads the MLP checkpoint and gets graphrun's accuracy ----
set(GR_CKPT_PY /usr/bin/python3)
set(GR_CKPT_FASHION /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz)
if(EXISTS ${GR_CKPT_PY} AND EXISTS ${GR_CKPT_FASHION})
  execute_process(COMMAND ${GR_CKPT_PY} -c "import numpy" RESULT_VARIABLE GR_CKPT_NUMPY
                  OUTPUT_QUIET ERROR_QUIET)
  if(GR_CKPT_NUMPY EQUAL 0)
    add_test(NAME checkpoint_interop_numpy
      COMMAND sh -c "$0 $1 --steps 300 --eval accuracy --checkpoint mlp.st --log mlp.jsonl --quiet && $2 $3 mlp.st --log mlp.jsonl"
              $<TARGET_FILE:graphrun> ${GR_CKPT_SRC}/examples/fashion_mlp.graph
              ${GR_CKPT_PY} ${GR_CKPT_SRC}/tests/interop/read_checkpoint.py
      WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(checkpoint_interop_numpy PROPERTIES TIMEOUT 300)
  endif()
endif()
