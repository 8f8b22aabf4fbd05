# tests/docs_numbers.cmake - the figures the docs quote from graphrun's own
# output (arena sizes, transfers) are today's (tests/docs_numbers.sh).
add_test(NAME docs_quote_todays_figures
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs_numbers.sh $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_quote_todays_figures PROPERTIES TIMEOUT 180)
