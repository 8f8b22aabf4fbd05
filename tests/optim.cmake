# tests/optim.cmake - the optimizer options on the command line: every line
# of the --log of a training target carries its learning rate.
add_test(NAME cli_log_has_the_learning_rate
  COMMAND sh -c "$0 $1 --steps 50 --log lr.jsonl --quiet && head -n 1 lr.jsonl | grep -q '\"lr\":0.1[,}]'"
          $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR}/examples/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
