# tests/examples.cmake - issue 26's and 27's example models (examples/fashion_denoise,
# fashion_resnet, word2vec, cifar_towers, llama, char_lstm) each trained in a tiny configuration by
# tests/examples.sh, which checks that it learns: the loss falls, and the
# denoiser's test mse, the ResNet's test accuracy (with batch norm's running
# statistics) or word2vec's final loss are where only training puts them.
# A few seconds each.
set(GR_EXAMPLES_SH sh ${CMAKE_CURRENT_SOURCE_DIR}/examples.sh $<TARGET_FILE:graphrun>
                   ${PROJECT_SOURCE_DIR}/examples)
if(EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  add_test(NAME example_denoise_trains COMMAND ${GR_EXAMPLES_SH} denoise --threads 2
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  add_test(NAME example_resnet_bn_trains COMMAND ${GR_EXAMPLES_SH} resnet --threads 2
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(example_denoise_trains example_resnet_bn_trains PROPERTIES TIMEOUT 120)
  # issue 27: TF's CIFAR-10 model in two synchronous towers (cpu:0 and cpu:1)
  add_test(NAME example_cifar_towers_trains COMMAND ${GR_EXAMPLES_SH} cifar_towers --threads 2
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(example_cifar_towers_trains PROPERTIES TIMEOUT 120)
  if(CMAKE_BUILD_TYPE STREQUAL "Tsan") # ThreadSanitizer trains about 20 times slower
    set_tests_properties(example_resnet_bn_trains example_cifar_towers_trains PROPERTIES
                         TIMEOUT 480)
  endif()
endif()
# issue 27: the Llama-style character model on the fortunes
if(EXISTS /usr/share/games/fortunes/fortunes)
  add_test(NAME example_llama_trains COMMAND ${GR_EXAMPLES_SH} llama --threads 1
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(example_llama_trains PROPERTIES TIMEOUT 60)
  # lstm_seq: the character LSTM
  add_test(NAME example_char_lstm_trains COMMAND ${GR_EXAMPLES_SH} char_lstm --threads 1
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(example_char_lstm_trains PROPERTIES TIMEOUT 30)
endif()
# on tests/models/tiny_text.txt, one thread and two Hogwild! executors
add_test(NAME example_word2vec_trains COMMAND ${GR_EXAMPLES_SH} word2vec --threads 1
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME example_word2vec_trains_hogwild
         COMMAND ${GR_EXAMPLES_SH} word2vec --executors 2 --threads 2
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(example_word2vec_trains example_word2vec_trains_hogwild PROPERTIES TIMEOUT 60)
