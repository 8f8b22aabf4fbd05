# tests/mpi.cmake - distributed training over Open MPI (tests/mpi/run.sh):
# label `mpi`, registered when the build has MPI and mpirun exists; the
# training cases also need Fashion-MNIST (scripts/bootstrap.sh installs all
# three), the schedule cases (tests/mpi/tiny.graph, tests/mpi/schedule.c)
# nothing more.  A schedule case that hangs on code without the checks
# fails at its TIMEOUT.
set(GR_MPI_DATA /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
set(GR_MPI_TRAIN_CASES oracle-sgd oracle-momentum oracle-adam resume kill mismatch async cli)
set(GR_MPI_SCHEDULE_CASES agree-steps agree-seed agree-eval agree-eval-every agree-sync-every
    agree-checkpoint agree-checkpoint-every agree-api leave-sync leave-mpi leave-every stop-sync
    stop-mpi other-eval other-target-sync other-target-mpi together backup-stall
    backup-stall-others backup-stall-root backup-leave backup-cli stale stale-lr bound bound-leave
    bound-eval bound-stop bound-cli)
if(GR_HAVE_MPI AND MPIEXEC_EXECUTABLE AND EXISTS /usr/bin/python3)
  add_executable(mpi_schedule ${CMAKE_CURRENT_SOURCE_DIR}/mpi/schedule.c)
  target_link_libraries(mpi_schedule PRIVATE graphrun_internal MPI::MPI_C)
  set(GR_MPI_CASES ${GR_MPI_SCHEDULE_CASES})
  if(EXISTS ${GR_MPI_DATA})
    list(APPEND GR_MPI_CASES ${GR_MPI_TRAIN_CASES})
  else()
    message(STATUS "graphrun: the MPI training tests are off (no Fashion-MNIST)")
  endif()
  foreach(c ${GR_MPI_CASES})
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/mpi/${c})
    file(MAKE_DIRECTORY ${dir})
    add_test(NAME mpi_${c}
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/mpi/run.sh ${c} $<TARGET_FILE:graphrun>
              ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:mpi_schedule>
      WORKING_DIRECTORY ${dir})
    # two processes each: never two such tests at once on a small machine
    set(timeout 120)
    if(c IN_LIST GR_MPI_SCHEDULE_CASES)
      set(timeout 60)
    elseif(CMAKE_BUILD_TYPE STREQUAL "Tsan")
      set(timeout 360) # ThreadSanitizer runs the trainings about 20 times slower
    endif()
    set_tests_properties(mpi_${c} PROPERTIES LABELS mpi TIMEOUT ${timeout} RUN_SERIAL ON)
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
  message(STATUS "graphrun: the MPI tests are off (no MPI, mpirun or python3)")
endif()
