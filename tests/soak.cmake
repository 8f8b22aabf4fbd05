# tests/soak.cmake - the soak test (tests/test_soak.c, registered with every
# test_*.c) in the label `soak`; `ctest -L soak` runs it alone.  It stops
# after a fixed amount of work, and its watchdog fails it when a thread is
# stuck in one call for 120 s, well before this TIMEOUT.  tests/soak.sh
# runs the long version.
set_tests_properties(test_soak PROPERTIES LABELS soak TIMEOUT 300)
