# tests/data.cmake - the data readers end to end (issue 23): non-regular and
# oversized inputs refused at once (tests/data_cli.sh), and an evaluation of a
# data set split between processes counting a last, partial batch
# (tests/data_eval_mpi.sh, when the build has MPI).
add_test(NAME data_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/data_cli.sh $<TARGET_FILE:graphrun>)
set_tests_properties(data_cli PROPERTIES TIMEOUT 120)

if(GR_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  add_test(NAME mpi_data_eval
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/data_eval_mpi.sh $<TARGET_FILE:graphrun>
            ${MPIEXEC_EXECUTABLE})
  # two processes: never beside the other MPI tests on a small machine
  set_tests_properties(mpi_data_eval PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
  if(CMAKE_BUILD_TYPE STREQUAL "Asan")
    set_property(TEST mpi_data_eval APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0")
  endif()
  if(CMAKE_BUILD_TYPE STREQUAL "Tsan") # Open MPI's own locks (named mpi_*: not the CPU's suppressions)
    set_property(TEST mpi_data_eval APPEND PROPERTY ENVIRONMENT
      "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/tsan.supp halt_on_error=1")
  endif()
endif()
