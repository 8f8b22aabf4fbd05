# tests/plot.cmake - `graphrun plot` end to end (tests/plot_cli.sh): charts
# of real --log files checked as XML with nice ticks and rendered by
# rsvg-convert (librsvg2-bin, which scripts/bootstrap.sh installs), and its
# errors.
add_test(NAME cli_plot
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plot_cli.sh $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR}
          /usr/bin/python3)
set_tests_properties(cli_plot PROPERTIES TIMEOUT 120)
