# tests/placement.cmake - devices on the command line (placement_cli.sh):
# the --devices limit, a device the machine lacks, soft placement of a
# variable, --cpu-as-gpu.  The compiler's side is tests/test_placement.c and the
# tests/compile/device_*.graph goldens.
add_test(NAME cli_placement
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/placement_cli.sh $<TARGET_FILE:graphrun>)
