# install.cmake: libkfuse (shared and static), and what `cmake --install`
# and the Debian package (CPack) put where:
#   bin/                      the tools
#   lib/libkfuse.so*, .a      the embedding API (include/kfuse/kfuse.h)
#   include/kfuse/            kfuse.h; kfuse_plugin.h and the two core headers it includes
#   share/kfuse/patterns/     the standard rules, found by installed tools (core/install.c)
#   share/kfuse/examples/     the examples the README's tour and docs use
#   lib/pkgconfig/kfuse.pc    pkg-config kfuse (relocatable: ${pcfiledir})
#   lib/cmake/kfuse/          find_package(kfuse): kfuse::kfuse, kfuse::kfuse_static, kfuse::plugin
#   share/doc/kfuse/          README and docs/
# Every path is relative to the prefix, so an installed tree moves whole
# (scripts/test-install.sh unpacks the .deb into a scratch directory).

# ---- libkfuse.so: the API's symbols only (kfuse_*), everything else hidden --
add_library(kfuse SHARED ${KF_API_SRC})
target_include_directories(kfuse PRIVATE api include)
target_link_libraries(kfuse PRIVATE kfcuda kfpasses kfrt kftext kfcore)
if(TARGET kfonnx)
  target_link_libraries(kfuse PRIVATE kfonnx)
  target_compile_definitions(kfuse PRIVATE KF_HAVE_ONNX)
endif()
set_target_properties(kfuse PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/api/libkfuse.map)
target_link_options(kfuse PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/api/libkfuse.map)
if(NOT KF_SANITIZE AND NOT KF_FUZZ)
  # every symbol resolved at link time (the sanitizers' come from the program)
  target_link_options(kfuse PRIVATE -Wl,-z,defs)
endif()

# ---- libkfuse.a: every layer's archive merged into one (ar's MRI script) ----
set(KF_STATIC_PARTS kfapi kfcuda kfpasses kfrt kftext kfcore)
if(TARGET kfonnx)
  list(APPEND KF_STATIC_PARTS kfonnx kfonnxpb)
endif()
set(mri "CREATE ${CMAKE_BINARY_DIR}/libkfuse.a\n")
foreach(t ${KF_STATIC_PARTS})
  string(APPEND mri "ADDLIB $<TARGET_FILE:${t}>\n")
endforeach()
string(APPEND mri "SAVE\nEND\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/libkfuse.mri CONTENT "${mri}")
set(KF_STATIC_FILES)
foreach(t ${KF_STATIC_PARTS})
  list(APPEND KF_STATIC_FILES $<TARGET_FILE:${t}>)
endforeach()
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/libkfuse.a
  COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_BINARY_DIR}/libkfuse.a
  COMMAND ${CMAKE_AR} -M < ${CMAKE_BINARY_DIR}/libkfuse.mri
  DEPENDS ${KF_STATIC_PARTS} ${CMAKE_BINARY_DIR}/libkfuse.mri
  COMMENT "libkfuse.a")
add_custom_target(kfuse_static ALL DEPENDS ${CMAKE_BINARY_DIR}/libkfuse.a)

# What a program linking libkfuse.a also needs (kfuse.pc's Libs.private, the
# CMake package's kfuse::kfuse_static).
set(KF_STATIC_DEPS "-llua5.4 -lm -ldl -lpthread")
if(TARGET kfonnx)
  string(APPEND KF_STATIC_DEPS " -lprotobuf-c")
endif()

# ---- installing ----------------------------------------------------------------
set(KF_TOOLS kfuse-opt kfuse-run kfuse-check kfuse-diff kfuse-verify-rules)
if(TARGET kfuse-import-onnx)
  list(APPEND KF_TOOLS kfuse-import-onnx)
endif()
install(TARGETS ${KF_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kfuse LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_BINARY_DIR}/libkfuse.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/kfuse/kfuse.h include/kfuse/kfuse_plugin.h core/kf.h core/pass.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kfuse)
install(DIRECTORY patterns/ DESTINATION ${CMAKE_INSTALL_DATADIR}/kfuse/patterns)
install(FILES examples/mlp.kf examples/cse.kf DESTINATION ${CMAKE_INSTALL_DATADIR}/kfuse/examples)
install(DIRECTORY examples/onnx examples/embed examples/plugins
  DESTINATION ${CMAKE_INSTALL_DATADIR}/kfuse/examples)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# pkg-config: paths from the .pc file's own place, so the tree may move
file(RELATIVE_PATH KF_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/kfuse.pc.in ${CMAKE_BINARY_DIR}/kfuse.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/kfuse.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# the CMake package: written by hand (libkfuse.a is not a CMake target) and
# relative to its own place too
include(CMakePackageConfigHelpers)
file(RELATIVE_PATH KF_CMAKE_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/cmake/kfuse ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/kfuseConfig.cmake.in ${CMAKE_BINARY_DIR}/kfuseConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kfuseConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kfuseConfig.cmake ${CMAKE_BINARY_DIR}/kfuseConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kfuse)

# ---- the Debian package: cpack -G DEB in the build directory ----------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kfuse)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel-fusion compiler for deep-learning graphs")
set(CPACK_PACKAGE_CONTACT "kfuse developers <kfuse@example.org>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# the libraries the tools and libkfuse.so link (liblua5.4, libprotobuf-c),
# read from the binaries by dpkg-shlibdeps; CUDA is loaded at run time
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "graphviz, nvidia-cuda-toolkit")
include(CPack)
