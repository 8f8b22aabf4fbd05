# tests/dot.cmake - graph pictures render with Graphviz (graphviz, which
# scripts/bootstrap.sh installs) and show the transfers between devices;
# the plan lists them with their bytes (tests/dot_cli.sh).
add_test(NAME cli_dot_renders_and_shows_transfers
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/dot_cli.sh $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_dot_renders_and_shows_transfers PROPERTIES TIMEOUT 120)
