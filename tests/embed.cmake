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

# (c) a C++ project (project(app CXX), no C enabled): the package asks for
# the core's dependencies only, never MPI or CUDA (the modules' own).
if(CMAKE_CXX_COMPILER)
    add_test(NAME embed_cxx_build
        COMMAND sh -c "rm -rf \"$1\" && \"$0\" -S \"$2\" -B \"$1\" -DCMAKE_PREFIX_PATH=\"$3\" \
-DCMAKE_CXX_COMPILER=\"$4\" -DCMAKE_CXX_FLAGS=\"$5\" >/dev/null && \"$0\" --build \"$1\""
                ${CMAKE_COMMAND} ${GR_EMBED_DIR}/cxx ${CMAKE_CURRENT_SOURCE_DIR}/external_cxx
                ${GR_EMBED_PREFIX} ${CMAKE_CXX_COMPILER} "${GR_EMBED_FLAGS}")
    set_tests_properties(embed_cxx_build PROPERTIES
        FIXTURES_REQUIRED gr_installed FIXTURES_SETUP gr_cxx_built)
    foreach(exe embed_cxx embed_cxx_static)
        add_test(NAME embed_cxx_run_${exe} COMMAND ${GR_EMBED_DIR}/cxx/${exe})
        set_tests_properties(embed_cxx_run_${exe} PROPERTIES FIXTURES_REQUIRED gr_cxx_built)
    endforeach()
endif()

# (d) a static link with the line docs/api.md shows: the archive, then
# pkg-config --static --cflags --libs; the program holds the library's code
# (gr_compile_string defined in it) and runs.
add_test(NAME embed_pkgconfig_static_build
    COMMAND sh -c "mkdir -p \"$1\" && \"$0\" $4 -o \"$1/embed_min_static\" \"$2\" \"$5\" \
$(\"$3\" --static --cflags --libs graphrun) && nm \"$1/embed_min_static\" | grep -q ' T gr_compile_string$'"
            ${CMAKE_C_COMPILER} ${GR_EMBED_DIR}/pc ${GR_EMBED_SRC}/embed_min.c
            ${PKG_CONFIG_EXECUTABLE} "${GR_EMBED_FLAGS}"
            ${GR_EMBED_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libgraphrun.a)
set_tests_properties(embed_pkgconfig_static_build PROPERTIES
    FIXTURES_REQUIRED gr_installed FIXTURES_SETUP gr_pc_static_built
    ENVIRONMENT "PKG_CONFIG_PATH=${GR_EMBED_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
add_test(NAME embed_pkgconfig_static_run COMMAND ${GR_EMBED_DIR}/pc/embed_min_static)
set_tests_properties(embed_pkgconfig_static_run PROPERTIES
    FIXTURES_REQUIRED gr_pc_static_built
    ENVIRONMENT "LD_LIBRARY_PATH=${GR_EMBED_PREFIX}/${CMAKE_INSTALL_LIBDIR}")

# The core loads anywhere: neither libgraphrun.so nor the CLI needs MPI or
# CUDA at load time (ldd: directly or through another library); the
# modules that need them are opened when a program first asks
# (runtime/modules.h).
set(GR_EMBED_NO_MODULE_DEPS [=[rc=0
for f in "$@"; do
  deps=$(ldd "$f") || { echo "ldd $f failed"; exit 1; }
  if echo "$deps" | grep -Ei 'libmpi|libopen-(pal|rte)|libcuda|libcublas'; then
    echo "$f needs the above at load time"; rc=1
  fi
done
exit $rc]=])
add_test(NAME embed_core_loads_without_mpi_or_cuda
    COMMAND sh -c "${GR_EMBED_NO_MODULE_DEPS}" sh $<TARGET_FILE:graphrun_shared>
            $<TARGET_FILE:graphrun>)

# A missing module is an error where it is needed, naming the module: the
# CLI copied alone into a folder, asked for --distributed.
if(GR_HAVE_MPI)
    add_test(NAME embed_missing_module_is_an_error_where_needed
        COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && cp \"$0\" \"$1/\" && \
out=$(env -u GR_MODULE_DIR \"$1/graphrun\" \"$2\" --distributed sync --steps 1 2>&1); rc=$?; \
echo \"$out\"; [ $rc -ne 0 ] && echo \"$out\" | grep -q 'libgraphrun-mpi.so was not found beside libgraphrun'"
                $<TARGET_FILE:graphrun> ${GR_EMBED_DIR}/alone ${CMAKE_CURRENT_SOURCE_DIR}/mpi/tiny.graph)
endif()
# The installed CLI (static, in bin/) finds the module in ../lib: one
# process of a distributed run, without mpirun.  Named mpi_* as the other
# tests that start Open MPI: under the sanitizers they take its
# suppressions (tests/mpi/lsan.supp, tsan.supp), not the CPU's.
if(GR_HAVE_MPI)
    add_test(NAME mpi_embed_installed_cli_finds_its_module
        COMMAND sh -c "cd \"$2\" && env -u GR_MODULE_DIR \"$0/bin/graphrun\" \"$1\" --distributed sync \
--steps 2"
                ${GR_EMBED_PREFIX} ${CMAKE_CURRENT_SOURCE_DIR}/mpi/tiny.graph ${GR_EMBED_DIR})
    set_tests_properties(mpi_embed_installed_cli_finds_its_module PROPERTIES
        FIXTURES_REQUIRED gr_installed)
    if(CMAKE_BUILD_TYPE STREQUAL "Asan") # Open MPI never frees its own state
        set_property(TEST mpi_embed_installed_cli_finds_its_module APPEND PROPERTY ENVIRONMENT
            "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0")
    endif()
    if(CMAKE_BUILD_TYPE STREQUAL "Tsan") # Open MPI's own locks and threads
        set_property(TEST mpi_embed_installed_cli_finds_its_module APPEND PROPERTY ENVIRONMENT
            "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/mpi/tsan.supp halt_on_error=1")
    endif()
endif()
# The same for @gpu:0 in a CUDA build: the compile error says why there is no GPU.
if(GR_HAVE_CUDA)
    add_test(NAME embed_missing_cuda_module_is_an_error_where_needed
        COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && cp \"$0\" \"$1/\" && \
out=$(env -u GR_MODULE_DIR -u GR_SIM_GPU \"$1/graphrun\" check \"$2\" 2>&1); rc=$?; \
echo \"$out\"; [ $rc -ne 0 ] && echo \"$out\" | grep -q 'no GPU: libgraphrun-cuda.so was not found beside'"
                $<TARGET_FILE:graphrun> ${GR_EMBED_DIR}/alone_cuda
                ${CMAKE_CURRENT_SOURCE_DIR}/compile/device_no_gpu.graph)
endif()

# The installed files, checked by name (the runs above prove they work);
# the modules that were built lie beside the library.
set(GR_EMBED_MODULE_FILES "")
if(GR_HAVE_MPI)
    string(APPEND GR_EMBED_MODULE_FILES " $1/libgraphrun-mpi.so")
endif()
if(GR_HAVE_CUDA)
    string(APPEND GR_EMBED_MODULE_FILES " $1/libgraphrun-cuda.so")
endif()
add_test(NAME embed_install_layout
    COMMAND sh -c "cd \"$0\" && for f in include/graphrun.h bin/graphrun $1/libgraphrun.a \
$1/libgraphrun.so $1/libgraphrun.so.0 $1/pkgconfig/graphrun.pc $1/cmake/graphrun/graphrunConfig.cmake \
$1/cmake/graphrun/graphrunConfigVersion.cmake $1/cmake/graphrun/graphrunTargets.cmake${GR_EMBED_MODULE_FILES}; \
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
    embed_cxx_build embed_cxx_run_embed_cxx embed_cxx_run_embed_cxx_static
    embed_pkgconfig_static_build embed_pkgconfig_static_run
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
