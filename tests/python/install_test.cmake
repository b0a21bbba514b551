# The Python package as `cmake --install` lays it out: install the `python` component into a fresh prefix
# and import cnnrt from there, with nothing of the build folder on the path.
#
# cmake -DBUILD_DIR=... -DPREFIX=... -DPYTHON=... -DSITE=lib/python3.X/site-packages -P install_test.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} --component python
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install --component python failed (${rc}):\n${out}")
endif()
if(IS_ABSOLUTE ${SITE})
  message(FATAL_ERROR "CNNRT_PYTHON_INSTALL_DIR is absolute (${SITE}): this test installs under a prefix")
endif()
set(site ${PREFIX}/${SITE})
foreach(file __init__.py __init__.pyi py.typed)
  if(NOT EXISTS ${site}/cnnrt/${file})
    message(FATAL_ERROR "the install lacks ${site}/cnnrt/${file}")
  endif()
endforeach()
set(check "import cnnrt, os, sys; from cnnrt import _cnnrt
assert cnnrt.__file__.startswith(sys.argv[1]), cnnrt.__file__
assert _cnnrt.__file__.startswith(sys.argv[1]), _cnnrt.__file__
assert cnnrt.version() == cnnrt.__version__
print('cnnrt', cnnrt.__version__, 'from', os.path.dirname(cnnrt.__file__))")
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH PYTHONPATH=${site} PYTHONDONTWRITEBYTECODE=1
  ${PYTHON} -c "${check}" ${site}
  WORKING_DIRECTORY ${PREFIX} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "importing the installed package failed (${rc}):\n${out}")
endif()
message(STATUS "${out}")
