# The package test: install this build into a fresh prefix, build apps/examples against it with
# find_package(cnnrt), and run the example on a model whose answers are known.
#
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DWRITER=... -DWITH_CUDA=ON|OFF -DWITH_PYTHON=ON|OFF
#       -DCXX_COMPILER=... -DGENERATOR=... -DMAKE_PROGRAM=... -DCMAKE_AR=... [-DSANITIZE_LINK_FLAGS=...]
#       -P package_test.cmake
# SANITIZE_LINK_FLAGS: in a sanitizer build the installed library is instrumented, so the example links
# the sanitizer runtimes too.

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# The engine and the model writer may be stale if only unit_tests was built; the install also copies the
# Python package when the build has it.
set(install_targets cnnrt_engine write_embed_test_model)
if(WITH_PYTHON)
  list(APPEND install_targets cnnrt_python)
endif()
run_step("building the engine" ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${install_targets})

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(GLOB_RECURSE config ${prefix}/*/cnnrtConfig.cmake)
file(GLOB_RECURSE version ${prefix}/*/cnnrtConfigVersion.cmake)
file(GLOB_RECURSE archive ${prefix}/*/libcnnrt.a)
if(NOT EXISTS ${prefix}/include/cnnrt/cnnrt.hpp OR NOT config OR NOT version OR NOT archive)
  message(FATAL_ERROR "the install into ${prefix} lacks the header, the package files or libcnnrt.a")
endif()
if(WITH_CUDA)
  # The kernels are an object library: their objects must be inside the installed archive.
  run_step("listing libcnnrt.a" ${CMAKE_AR} t ${archive})
  if(NOT step_output MATCHES "\\.cu\\.o")
    message(FATAL_ERROR "the installed libcnnrt.a holds no CUDA kernel objects:\n${step_output}")
  endif()
endif()

# The example, as an outside project: only the temporary prefix may satisfy find_package(cnnrt).
set(example ${WORK_DIR}/example)
set(make_program)
if(MAKE_PROGRAM)
  set(make_program -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
run_step("configuring apps/examples" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/apps/examples -B ${example}
  -G ${GENERATOR} ${make_program} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_LINK_FLAGS}")
file(STRINGS ${example}/CMakeCache.txt found_dir REGEX "^cnnrt_DIR:")
if(NOT found_dir MATCHES "${prefix}")
  message(FATAL_ERROR "find_package(cnnrt) found a cnnrt outside ${prefix}: ${found_dir}")
endif()
run_step("building apps/examples" ${CMAKE_COMMAND} --build ${example})

set(classes 7 2 0 9 4)
run_step("writing the test model" ${WRITER} ${WORK_DIR}/model.onnx ${WORK_DIR}/images.pb ${classes})
run_step("running classify_embed" ${example}/classify_embed ${WORK_DIR}/model.onnx ${WORK_DIR}/images.pb)
set(index 0)
foreach(cls IN LISTS classes)
  if(NOT step_output MATCHES "image ${index}: class ${cls} ")
    message(FATAL_ERROR "classify_embed should put image ${index} in class ${cls}; it printed:\n${step_output}")
  endif()
  math(EXPR index "${index} + 1")
endforeach()
message(STATUS "classify_embed, built against the installed package:\n${step_output}")
