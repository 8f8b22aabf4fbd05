# tests/embed.cmake - embedding graphrun: the installed package works from
# outside (find_package and pkg-config), and the embedding examples build,
# train asynchronously from several threads and reach their targets.
#
# Order, by fixtures: embed_install -> embed_{cmake,pkgconfig}_build ->
# embed_{cmake,pkgconfig}_run.  Everything lives under build/tests/embed/.
set(GR_EMBED_DIR ${CMAKE_CURRENT_BINARY_DIR}/embed)
set(GR_EMBED_PREFIX ${GR_EMBED_DIR}/prefix)
set(GR_EMBED_SRC ${CMAKE_CURRENT_SOURCE_DIR}/external)

# A sanitizer build of the library needs the same runtime in the program.
set(GR_EMBED_FLAGS "")
if(CMAKE_BUILD_TYPE STREQUAL "Asan")
    set(GR_EMBED_FLAGS "-fsanitize=address,undefined")
elseif(CMAKE_BUILD_TYPE STREQUAL "Tsan")
    set(GR_EMBED_FLAGS "-fsanitize=thread")
endif()

add_test(NAME embed_install
    COMMAND sh -c "rm -rf \"$1\" && \"$0\" --install \"$2\" --prefix \"$1\" >/dev/null"
            ${CMAKE_COMMAND} ${GR_EMBED_PREFIX} ${CMAKE_BINARY_DIR})
set_tests_properties(embed_install PROPERTIES FIXTURES_SETUP gr_installed)

# (a) a CMake project: find_package(graphrun) and the imported targets.
add_test(NAME embed_cmake_build
    COMMAND sh -c "rm -rf \"$1\" && \"$0\" -S \"$2\" -B \"$1\" -DCMAKE_PREFIX_PATH=\"$3\" \
-DCMAKE_C_COMPILER=\"$4\" -DCMAKE_C_FLAGS=\"$5\" >/dev/null && \"$0\" --build \"$1\""
            ${CMAKE_COMMAND} ${GR_EMBED_DIR}/cmake ${GR_EMBED_SRC} ${GR_EMBED_PREFIX}
            ${CMAKE_C_COMPILER} "${GR_EMBED_FLAGS}")
set_tests_properties(embed_cmake_build PROPERTIES
    FIXTURES_REQUIRED gr_installed FIXTURES_SETUP gr_cmake_built)
foreach(exe embed_min embed_min_static)
    add_test(NAME embed_cmake_run_${exe} COMMAND ${GR_EMBED_DIR}/cmake/${exe})
    set_tests_properties(embed_cmake_run_${exe} PROPERTIES FIXTURES_REQUIRED gr_cmake_built)
endforeach()

# (b) a plain compiler line: cc $(pkg-config --cflags --libs graphrun).
add_test(NAME embed_pkgconfig_build
    COMMAND sh -c "mkdir -p \"$1\" && \"$0\" $4 -o \"$1/embed_min\" \"$2\" \
$(\"$3\" --cflags --libs graphrun)"
            ${CMAKE_C_COMPILER} ${GR_EMBED_DIR}/pc ${GR_EMBED_SRC}/embed_min.c
            ${PKG_CONFIG_EXECUTABLE} "${GR_EMBED_FLAGS}")
set_tests_properties(embed_pkgconfig_build PROPERTIES
    FIXTURES_REQUIRED gr_installed FIXTURES_SETUP gr_pc_built
    ENVIRONMENT "PKG_CONFIG_PATH=${GR_EMBED_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
add_test(NAME embed_pkgconfig_run COMMAND ${GR_EMBED_DIR}/pc/embed_min)
set_tests_properties(embed_pkgconfig_run PROPERTIES
    FIXTURES_REQUIRED gr_pc_built
    ENVIRONMENT "LD_LIBRARY_PATH=${GR_EMBED_PREFIX}/${CMAKE_INSTALL_LIBDIR}")

# The installed files, checked by name (the runs above prove they work).
add_test(NAME embed_install_layout
    COMMAND sh -c "cd \"$0\" && for f in include/graphrun.h bin/graphrun $1/libgraphrun.a \
$1/libgraphrun.so $1/libgraphrun.so.0 $1/pkgconfig/graphrun.pc $1/cmake/graphrun/graphrunConfig.cmake \
$1/cmake/graphrun/graphrunConfigVersion.cmake $1/cmake/graphrun/graphrunTargets.cmake; \
do test -e $f || { echo missing $f; exit 1; }; done"
            ${GR_EMBED_PREFIX} ${CMAKE_INSTALL_LIBDIR})
set_tests_properties(embed_install_layout PROPERTIES FIXTURES_REQUIRED gr_installed)

# docs/api.md shows embed_min.c in full: the copy must stay identical.
set(GR_EMBED_DOC_DIFF [=[awk '/^<!-- end embed_min.c -->$/ {f = 0} f && !/^```/ {print}
/^<!-- begin embed_min.c -->$/ {f = 1}' "$0" | diff -u - "$1"]=])
add_test(NAME embed_doc_example_matches
    COMMAND sh -c "${GR_EMBED_DOC_DIFF}" ${PROJECT_SOURCE_DIR}/docs/api.md ${GR_EMBED_SRC}/embed_min.c)

# ---- the embedding examples: asynchronous training from several threads ----
foreach(ex hogwild towers_async generate)
    add_executable(${ex} ${PROJECT_SOURCE_DIR}/examples/embed/${ex}.c)
    target_link_libraries(${ex} PRIVATE graphrun_static Threads::Threads m)
    target_compile_definitions(${ex} PRIVATE GR_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples")
endforeach()

# sh -c script: runs "$@"; passes when it exits 0 and its output matches $0.
set(GR_EMBED_EXPECT [=[out=$("$@") || { echo "$out"; exit 1; }
echo "$out"; echo "$out" | grep -Eq "$0" || { echo "output does not match: $0"; exit 1; }]=])
if(EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
    add_test(NAME embed_hogwild
        COMMAND sh -c "${GR_EMBED_EXPECT}" "^accuracy 0\\.[5-9]"
                $<TARGET_FILE:hogwild> ${PROJECT_SOURCE_DIR}/examples/fashion_mlp.graph 2 100)
    add_test(NAME embed_towers_async
        COMMAND sh -c "${GR_EMBED_EXPECT}" "^training loss [0-9.]+ -> [0-9.]+$"
                $<TARGET_FILE:towers_async> ${PROJECT_SOURCE_DIR}/examples/two_towers.graph 100)
endif()

set(GR_EMBED_TESTS embed_install embed_cmake_build embed_cmake_run_embed_min
    embed_cmake_run_embed_min_static embed_pkgconfig_build embed_pkgconfig_run
    embed_install_layout embed_doc_example_matches embed_hogwild embed_towers_async)
foreach(t ${GR_EMBED_TESTS})
    if(TEST ${t})
        set_property(TEST ${t} PROPERTY TIMEOUT 120)
    endif()
endforeach()

# Both libraries make global exactly the functions include/graphrun.h
# declares: the shared one through cmake/graphrun.map, the static one by its
# prelinked object.  The script reads the list from the header, so an
# internal gr_ name that leaks, or a declaration nobody defines, fails here.
add_test(NAME embed_libraries_export_only_the_api
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api_exports.sh ${CMAKE_NM}
            ${PROJECT_SOURCE_DIR}/include/graphrun.h
            $<TARGET_FILE:graphrun_shared> $<TARGET_FILE:graphrun_static>)

# ---- the character GPT: trained tiny, then sampled by examples/embed/generate.c ----
if(EXISTS /usr/share/games/fortunes/fortunes)
    add_test(NAME char_gpt_train_and_generate
        COMMAND sh ${PROJECT_SOURCE_DIR}/tests/char_gpt.sh $<TARGET_FILE:graphrun>
                $<TARGET_FILE:generate> ${PROJECT_SOURCE_DIR}/examples/char_gpt.graph
        WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(char_gpt_train_and_generate PROPERTIES TIMEOUT 300)
endif()
