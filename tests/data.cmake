# tests/data.cmake - the data readers end to end (issue 23): non-regular and
# oversized inputs refused at once (tests/data_cli.sh).
add_test(NAME data_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/data_cli.sh $<TARGET_FILE:graphrun>)
set_tests_properties(data_cli PROPERTIES TIMEOUT 120)

