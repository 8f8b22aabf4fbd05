# tests/soak.cmake - the soak test (tests/test_soak.c, registered with every
# test_*.c) in the label `soak`; `ctest -L soak` runs it alone.  It stops
# after a fixed amount of work, and its watchdog fails it when a thread is
# stuck in one call for 120 s, well before this TIMEOUT.  tests/soak.sh
# runs the long version.
set_tests_properties(test_soak PROPERTIES LABELS soak TIMEOUT 300)

# KNOWN BUG, left failing on purpose until runtime/session.c is fixed:
# gr_eval on a data source that gr_run calls are reading at the same time
# moves their cursor and evaluates the wrong batches (see the comment above
# test_known_bug_eval_beside_training_moves_its_cursor in test_soak.c).
# The soak entry skips that test; this entry runs it alone.
set_tests_properties(test_soak PROPERTIES ENVIRONMENT "SOAK_SKIP=test_known_bug_*")
add_test(NAME soak_known_bug_eval_beside_training COMMAND test_soak)
set_tests_properties(soak_known_bug_eval_beside_training PROPERTIES
  LABELS known-bug TIMEOUT 300 ENVIRONMENT "SOAK_ONLY=test_known_bug_*")
