# tests/sim.cmake - the CPU suite again on the simulated GPU (devices/sim):
# GR_SIM_GPU=2 gives the machine two simulated GPUs, and GR_TEST_ON_GPU=1
# tells the tests to compile with gr_compile_options.cpu_as_gpu
# (tests/gr_test.h), which moves every cpu:N node and variable to gpu:N
# (data sources stay on the host); the embedding examples get it as their
# trailing --cpu-as-gpu argument.  Memory the host touches without the
# device crashes there, and a missing sync or event reads stale data, so
# these runs prove that the runtime reaches device memory only through the
# device.  Label `sim`.
set(GR_SIM_ENV "GR_SIM_GPU=2" "GR_TEST_ON_GPU=1")
foreach(t test_train test_optim test_state test_text test_partitions test_concurrency test_checkpoint test_soak
    test_staleness)
  add_test(NAME sim_${t} COMMAND ${t})
  set_tests_properties(sim_${t} PROPERTIES LABELS sim TIMEOUT 300 ENVIRONMENT "${GR_SIM_ENV}")
endforeach()
if(TEST embed_hogwild)
  add_test(NAME sim_embed_hogwild
    COMMAND sh -c "${GR_EMBED_EXPECT}" "^accuracy 0\\.[5-9]"
            $<TARGET_FILE:hogwild> ${PROJECT_SOURCE_DIR}/examples/fashion_mlp.graph 2 100 --cpu-as-gpu)
  add_test(NAME sim_embed_towers_async
    COMMAND sh -c "${GR_EMBED_EXPECT}" "^training loss [0-9.]+ -> [0-9.]+$"
            $<TARGET_FILE:towers_async> ${PROJECT_SOURCE_DIR}/examples/two_towers.graph 100 --cpu-as-gpu)
  set_tests_properties(sim_embed_hogwild sim_embed_towers_async PROPERTIES
    LABELS sim TIMEOUT 300 ENVIRONMENT "GR_SIM_GPU=2")
endif()
