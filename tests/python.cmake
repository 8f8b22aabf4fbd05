# tests/python.cmake - the Python package (python/, docs/python.md).
#
# Builds graphrun._graphrun against this build's libgraphrun.so into
# BUILD/python/graphrun/ (with a copy of python/graphrun/*.py), then runs
# python/tests with pytest, one CTest test per file, PYTHONPATH pointing
# there.  python_pip_install checks the user's route: `pip install
# --no-build-isolation --no-index` of a copy of python/ into a venv made
# with --system-site-packages, then an import and a run from elsewhere.
#
# The interpreter is GR_PYTHON (default /usr/bin/python3: Debian's, whose
# python3-dev, python3-numpy, python3-pytest and python3-venv bootstrap
# installs).  When something is missing the tests are still registered and
# fail saying what to install: CI runs on a clean machine after bootstrap.
# All carry the label `python` (ctest -L python).
#
# Not in the Asan and Tsan builds: an uninstrumented python3 can load a
# sanitized libgraphrun only with the sanitizer runtime in LD_PRELOAD, and
# then reports CPython's own allocations; the C tests cover the library
# there, and these tests exercise the binding, which is the same code in
# every build.
if(CMAKE_BUILD_TYPE MATCHES "^(Asan|Tsan)$")
    message(STATUS "graphrun: Python tests skipped in the ${CMAKE_BUILD_TYPE} build")
    return()
endif()

set(GR_PYTHON "" CACHE FILEPATH
    "python3 for the Python package and its tests (empty: /usr/bin/python3 when it exists)")
if(GR_PYTHON)
    set(Python3_EXECUTABLE ${GR_PYTHON})
elseif(EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 3.9 COMPONENTS Interpreter Development.Module)

set(GR_PY_MISSING "")
if(NOT Python3_Interpreter_FOUND)
    set(GR_PY_MISSING "python3")
elseif(NOT Python3_Development.Module_FOUND)
    set(GR_PY_MISSING "python3-dev")
else()
    foreach(mod numpy pytest setuptools wheel ensurepip)
        execute_process(COMMAND ${Python3_EXECUTABLE} -c "import ${mod}"
                        RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
        if(NOT rc EQUAL 0)
            if(mod STREQUAL "ensurepip")
                set(mod venv)
            endif()
            list(APPEND GR_PY_MISSING python3-${mod})
        endif()
    endforeach()
endif()

set(GR_PY_TESTS feeds_fetches errors variables checkpoints threads views)
if(GR_PY_MISSING)
    string(REPLACE ";" " " GR_PY_MISSING "${GR_PY_MISSING}")
    message(WARNING "graphrun: the Python tests need ${GR_PY_MISSING} "
                    "(scripts/bootstrap.sh installs them); they will fail")
    foreach(t ${GR_PY_TESTS} pip_install)
        add_test(NAME python_${t} COMMAND sh -c "echo \"missing: $0 (run scripts/bootstrap.sh)\"; exit 1"
                 "${GR_PY_MISSING}")
    endforeach()
    return()
endif()
message(STATUS "graphrun: Python package tests with ${Python3_EXECUTABLE}")

set(GR_PY_OUT ${CMAKE_BINARY_DIR}/python)
Python3_add_library(graphrun_python MODULE WITH_SOABI ${PROJECT_SOURCE_DIR}/python/graphrun/_graphrun.c)
target_link_libraries(graphrun_python PRIVATE graphrun_shared)
target_include_directories(graphrun_python PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(graphrun_python PROPERTIES
    OUTPUT_NAME _graphrun
    LIBRARY_OUTPUT_DIRECTORY ${GR_PY_OUT}/graphrun
    C_VISIBILITY_PRESET hidden)
file(GLOB GR_PY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/graphrun/*.py)
foreach(f ${GR_PY_SOURCES})
    get_filename_component(n ${f} NAME)
    configure_file(${f} ${GR_PY_OUT}/graphrun/${n} COPYONLY)
endforeach()

set(GR_PY_ENV
    "PYTHONPATH=${GR_PY_OUT}"
    "PYTHONDONTWRITEBYTECODE=1"
    "GR_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
    "GR_CLI=$<TARGET_FILE:graphrun>")
foreach(t ${GR_PY_TESTS})
    add_test(NAME python_${t}
        COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
                ${PROJECT_SOURCE_DIR}/python/tests/test_${t}.py
        WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(python_${t} PROPERTIES ENVIRONMENT "${GR_PY_ENV}" TIMEOUT 300
                         LABELS python)
endforeach()

# pip's route, on a copy of python/ (setuptools builds in place: the source
# tree stays clean), against this build folder, offline.
set(GR_PIP_DIR ${CMAKE_CURRENT_BINARY_DIR}/python_pip)
set(GR_PIP_SCRIPT [=[set -e
d=$0; py=$1; src=$2; build=$3
rm -rf "$d" && mkdir -p "$d" && cp -r "$src/python" "$d/src"
rm -rf "$d/src/build" "$d/src/"*.egg-info "$d/src/graphrun/"*.so*
"$py" -m venv --system-site-packages "$d/venv"
GRAPHRUN_SOURCE_DIR="$src" GRAPHRUN_BUILD_DIR="$build" GRAPHRUN_NO_BUILD=1 \
    "$d/venv/bin/pip" install -q --no-index --no-build-isolation "$d/src"
cd "$d" && "$d/venv/bin/python" -c '
import graphrun, numpy as np
p = graphrun.compile_string("input x: f32[2]\ny = x * 2\n")
s = graphrun.Session(p)
v = s.run("y", feed={"x": [1.0, 2.5]})
assert v.tolist() == [2.0, 5.0], v
print("pip install ok:", graphrun.__file__, graphrun.version())
']=])
add_test(NAME python_pip_install
    COMMAND sh -c "${GR_PIP_SCRIPT}" ${GR_PIP_DIR} ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}
            ${CMAKE_BINARY_DIR})
set_tests_properties(python_pip_install PROPERTIES TIMEOUT 300 LABELS python)
