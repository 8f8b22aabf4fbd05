# tests/outputs.cmake - the files the command line writes never destroy
# anything, and signals stop a run cleanly (tests/outputs_cli.sh, one case
# per class: special files, symbolic links, write errors, outputs that are
# inputs, JSON with NaN, SIGTERM/SIGINT, Ctrl-C in the final --eval,
# --tensorboard on a file, plot --smooth, fmt's input limit, standard output
# on a full disk, fmt and plot reading only regular files).
foreach(case special symlinks errors inputs json signals eval tensorboard plotopts
             stdin stdout readers)
  add_test(NAME outputs_${case}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/outputs_cli.sh $<TARGET_FILE:graphrun>
            ${PROJECT_SOURCE_DIR} /usr/bin/python3 ${case})
  set_tests_properties(outputs_${case} PROPERTIES TIMEOUT 120)
endforeach()
