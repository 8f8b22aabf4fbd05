# tests/staleness.cmake - the CLI records the updates' staleness
# (tests/staleness_cli.sh; the counting itself: test_staleness.c).
add_test(NAME cli_staleness_in_log_and_summary
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/staleness_cli.sh $<TARGET_FILE:graphrun>)
set_tests_properties(cli_staleness_in_log_and_summary PROPERTIES TIMEOUT 120)
