# tests/tensorboard.cmake - test_tensorboard also runs the graphrun command
# line (--tensorboard with --log, Hogwild!, Ctrl-C, SIGKILL): it needs its
# path and must be built after it.
target_compile_definitions(test_tensorboard PRIVATE GR_CLI="$<TARGET_FILE:graphrun>")
add_dependencies(test_tensorboard graphrun)
