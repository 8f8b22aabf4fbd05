# tests/numbers.cmake - numbers from outside are parsed strictly (issue 23):
# the training command's number options and a checkpoint's step, end to end.
# (--set is in tests/compile/set_*.graph, checkpoint metadata and the option
# structs of the C API in test_checkpoint.c and test_api_options.c.)
add_test(NAME cli_numbers_strict
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/numbers_cli.sh $<TARGET_FILE:graphrun>)
set_tests_properties(cli_numbers_strict PROPERTIES TIMEOUT 300)
