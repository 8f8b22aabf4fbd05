# tests/cli.cmake - the graphrun command line, end to end: examples check,
# training writes its JSON log, misuse exits 2, and a short training run is
# clean under valgrind.
set(GR_EX ${PROJECT_SOURCE_DIR}/examples)
file(GLOB GR_EXAMPLES CONFIGURE_DEPENDS ${GR_EX}/*.graph)

add_test(NAME cli_check_examples COMMAND graphrun check ${GR_EXAMPLES})

add_test(NAME cli_train_log
  COMMAND sh -c "$0 $1 --steps 300 --log log.jsonl --quiet && tail -n 1 log.jsonl | grep -q '\"event\":\"done\",\"steps\":300'"
          $<TARGET_FILE:graphrun> ${GR_EX}/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

# --profile: the summary, then the costliest nodes with their op, output and line.
add_test(NAME cli_profile
  COMMAND sh -c "$0 $1 --steps 5 --profile --quiet 2> prof.err > /dev/null || exit 1; cat prof.err
    grep -q '^profile: ' prof.err && grep -q 'conv2d_bias *f32\\[8,4,4,4\\] *cpu:0 *9: return maxpool2d' prof.err || exit 1
    $0 $1 --steps 5 --profile --quiet --log prof.jsonl 2> /dev/null > /dev/null || exit 1
    tail -n 1 prof.jsonl | grep -q '^{\"event\":\"profile\",\"steps\":5,\"nodes\":\\[{\"op\":' || exit 1
    grep -q '{\"op\":\"conv2d_bias\",\"type\":\"f32\\[8,4,4,4\\]\",\"device\":\"cpu:0\",\"file\":\"[^\"]*tiny_cnn.graph\",\"line\":9,\"calls\":5,' prof.jsonl"
          $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR}/tests/models/tiny_cnn.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

add_test(NAME cli_missing_steps_is_usage_error
  COMMAND graphrun ${GR_EX}/linear_regression.graph)
set_tests_properties(cli_missing_steps_is_usage_error PROPERTIES WILL_FAIL TRUE)

# A missing model file is usage (2) when training as in every command
# (the rule: tools/cli_opts.c, cli_exit_rule; docs/cli.md).
add_test(NAME cli_exit_codes
  COMMAND sh -c "$0 nosuch.graph --steps 1; test $? -eq 2 || exit 1; $0 x.graph --steps 1 --bogus; test $? -eq 2"
          $<TARGET_FILE:graphrun>)

# Did-you-mean, exact option names, one-line usage errors, the exit-status
# rule, the man page against --help, the completion script, --version.
add_test(NAME cli_help COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/help_cli.sh $<TARGET_FILE:graphrun>
                               ${PROJECT_SOURCE_DIR})

# The CLI's helpers (tools/cli_util.c): the rate of the progress line, suggestions.
target_sources(test_cli_util PRIVATE ${PROJECT_SOURCE_DIR}/tools/cli_util.c)
target_include_directories(test_cli_util PRIVATE ${PROJECT_SOURCE_DIR}/tools)

# OpenBLAS 0.3.21 falls back to its generic kernels (Prescott) on CPUs it
# does not know; the CLI then re-runs itself with the kernels the CPU has:
# where the CPU has AVX2 and FMA, --version must not report Prescott.
add_test(NAME cli_blas_kernels_not_generic
  COMMAND sh -c "out=$(env -u OPENBLAS_CORETYPE $0 --version) || exit 1; echo \"$out\"
    grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || exit 0
    case $out in *Prescott*) exit 1;; esac"
          $<TARGET_FILE:graphrun>)

# Valgrind cannot run a binary built with a sanitizer (the Asan and Tsan
# build types check memory and races themselves).
find_program(GR_VALGRIND valgrind)
if(GR_VALGRIND AND NOT CMAKE_BUILD_TYPE MATCHES "^(Asan|Tsan)$")
  # OpenBLAS picks AVX-512 kernels at run time, which valgrind cannot decode.
  add_test(NAME valgrind_train_tiny_cnn
    COMMAND ${GR_VALGRIND} --error-exitcode=3 --leak-check=full
            --suppressions=${CMAKE_CURRENT_SOURCE_DIR}/valgrind.supp
            --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
            $<TARGET_FILE:graphrun> ${PROJECT_SOURCE_DIR}/tests/models/tiny_cnn.graph
            --steps 20 --eval accuracy --quiet)
  set_tests_properties(valgrind_train_tiny_cnn PROPERTIES ENVIRONMENT "OPENBLAS_CORETYPE=Haswell"
                       TIMEOUT 600)
endif()

add_test(NAME cli_hogwild_executors
  COMMAND sh -c "$0 $1 --steps 2000 --executors 4 --threads 2 --log hog.jsonl --quiet && tail -n 1 hog.jsonl | grep -q '\"steps\":2000'"
          $<TARGET_FILE:graphrun> ${GR_EX}/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME cli_two_targets_at_once
  COMMAND graphrun ${GR_EX}/two_towers.graph --steps 200 --target train_0 --target train_1 --quiet)
set_tests_properties(cli_two_targets_at_once PROPERTIES PASS_REGULAR_EXPRESSION "trained train_0, train_1: 200 steps")

# A bad --eval is reported before any training, with the name.
add_test(NAME cli_bad_eval_fails_before_training
  COMMAND sh -c "! $0 $1 --steps 100000000 --eval nope 2>err.txt && grep -q \"no target named 'nope'\" err.txt"
          $<TARGET_FILE:graphrun> ${GR_EX}/linear_regression.graph
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli_bad_eval_fails_before_training PROPERTIES TIMEOUT 20)

# The MLP's two big weight gradients fuse into their SGD updates (one GEMM
# accumulating into the variable; the 256x10 one is below the threshold),
# and the plan shows it.
add_test(NAME cli_plan_fuses_sgd_into_gemm
  COMMAND sh -c "$0 check --emit plan --target train $1 | grep -c ' apply_sgd_matmul ' | grep -qx 2"
          $<TARGET_FILE:graphrun> ${GR_EX}/fashion_mlp.graph)

# graphrun fmt: printing, stdin, --check, -w (errors, read-only files, mode),
# and our own examples being canonical.
add_test(NAME cli_fmt COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fmt_cli.sh $<TARGET_FILE:graphrun>
                              ${PROJECT_SOURCE_DIR})

# The top-level Makefile: `make demo` builds only the graphrun it runs (not
# the 40-odd test and fuzz targets `make test` builds), `make install` installs.
add_test(NAME make_demo_builds_only_the_cli
  COMMAND sh -c "out=$(make -s -n -C $0 demo BUILD=B) || exit 1; echo \"$out\"
    echo \"$out\" | grep -qx 'cmake --build B -j[0-9]* --target graphrun' || exit 1
    ! echo \"$out\" | grep -qx 'cmake --build B -j[0-9]*' || exit 1
    make -s -n -C $0 test BUILD=B | grep -qx 'cmake --build B -j[0-9]*' || exit 1
    make -s -n -C $0 install BUILD=B PREFIX=/p | grep -qx 'cmake --install B --prefix /p'"
          ${PROJECT_SOURCE_DIR})

# graphrun launch: mpirun with --oversubscribe past the cores and
# --allow-run-as-root as root (both refused by default), this graphrun by
# its full path, the training command line as given.
add_test(NAME cli_launch_dry_run
  COMMAND sh -c "out=$($0 launch -np 4096 --dry-run $1 --steps 5 --distributed sync) || exit 1; echo \"$out\"
    root=; [ $(id -u) -eq 0 ] && root='--allow-run-as-root '
    [ \"$out\" = \"mpirun $root--oversubscribe -np 4096 $0 $1 --steps 5 --distributed sync\" ] || exit 1
    $0 launch -np 1 --dry-run --mpirun /x/mpirun $1 | grep -q '^/x/mpirun .*-np 1 ' || exit 1
    $0 launch -np 1 --dry-run $1 | grep -q -- --oversubscribe && exit 1
    $0 launch $1 2>&1 | grep -q 'launch: -np N is required'"
          $<TARGET_FILE:graphrun> ${GR_EX}/linear_regression.graph)
if(GR_HAVE_MPI)
  # 4 processes on any machine, as root too (the README's command).
  add_test(NAME mpi_cli_launch
    COMMAND graphrun launch -np 4 ${GR_EX}/linear_regression.graph --steps 50 --distributed sync --quiet)
  set_tests_properties(mpi_cli_launch PROPERTIES LABELS mpi TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "distributed: 4 processes")
endif()
