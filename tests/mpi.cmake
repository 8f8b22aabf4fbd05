# tests/mpi.cmake - distributed training over Open MPI (tests/mpi/run.sh):
# label `mpi`, registered when the build has MPI, mpirun exists and
# Fashion-MNIST is installed (scripts/bootstrap.sh installs all three).
set(GR_MPI_DATA /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
if(GR_HAVE_MPI AND MPIEXEC_EXECUTABLE AND EXISTS ${GR_MPI_DATA} AND EXISTS /usr/bin/python3)
  foreach(c oracle-sgd oracle-momentum oracle-adam resume kill mismatch async cli)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/mpi/${c})
    file(MAKE_DIRECTORY ${dir})
    add_test(NAME mpi_${c}
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/mpi/run.sh ${c} $<TARGET_FILE:graphrun>
              ${MPIEXEC_EXECUTABLE}
      WORKING_DIRECTORY ${dir})
    # two processes each: never two such tests at once on a small machine
    set_tests_properties(mpi_${c} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
    if(CMAKE_BUILD_TYPE STREQUAL "Tsan")
      # Open MPI's own locks and threads (tests/mpi/tsan.supp); no Hogwild!
      # here (one executor a process), so not devices/cpu/tsan.supp
      set_property(TEST mpi_${c} APPEND PROPERTY ENVIRONMENT
        "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/tsan.supp halt_on_error=1")
    endif()
    if(CMAKE_BUILD_TYPE STREQUAL "Asan")
      # Open MPI never frees its own state: LeakSanitizer skips its libraries
      # (full stacks are needed to see them) and checks graphrun's allocations.
      set_property(TEST mpi_${c} APPEND PROPERTY ENVIRONMENT
        "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0")
    endif()
  endforeach()
else()
  message(STATUS "graphrun: the MPI tests are off (no MPI, mpirun or Fashion-MNIST)")
endif()
