# tests/inspect.cmake - `graphrun inspect` end to end (tests/inspect_cli.sh):
# a real checkpoint's report, --json against numpy (Debian's python3 with
# python3-numpy, as tests/checkpoint.cmake uses), and damaged files.
add_test(NAME cli_inspect
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/inspect_cli.sh $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR}
          /usr/bin/python3)
set_tests_properties(cli_inspect PROPERTIES TIMEOUT 120)
