# cmake --install: headers under include/xgrad, libxgrad.a and
# libxgrad_onnx.a, a CMake package (find_package(xgrad) -> targets
# xgrad::xgrad and xgrad::onnx), xgrad.pc for pkg-config, the program
# xg_export; and cpack -G DEB: a libxgrad-dev package that apt installs.
include(CMakePackageConfigHelpers)
set(XG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/xgrad)

install(TARGETS xgrad EXPORT xgradTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The public API only: no detail/ header (the library's own internals, among
# them the one that includes <mpi.h>).
install(DIRECTORY autograd data engine nn optim models distributed train
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad FILES_MATCHING PATTERN "*.h" PATTERN "detail" EXCLUDE)
# The exporter: libxgrad_onnx as the target xgrad::onnx, and its headers
# (xg_export, the program, is installed by apps/xg_export).
set_target_properties(xgrad_onnx PROPERTIES EXPORT_NAME onnx)
install(TARGETS xgrad_onnx EXPORT xgradTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY onnx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad FILES_MATCHING PATTERN "*.h" PATTERN "detail" EXCLUDE)
install(EXPORT xgradTargets NAMESPACE xgrad:: DESTINATION ${XG_CMAKE_DIR})
configure_package_config_file(cmake/xgradConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/xgradConfig.cmake
                              INSTALL_DESTINATION ${XG_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/xgradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/xgradConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/xgradConfigVersion.cmake
        DESTINATION ${XG_CMAKE_DIR})

# pkg-config: relocatable (the prefix is found from the .pc file's own place).
# libxgrad is static, so Libs lists what it links: oneDNN and its OpenMP
# runtime, OpenBLAS, zlib, fmt.
set(XG_PC_LIBS "-lxgrad")
if(XG_GEMM STREQUAL "onednn")
  string(APPEND XG_PC_LIBS " -ldnnl -lgomp")
endif()
string(APPEND XG_PC_LIBS " -lopenblas -lz -lpthread")
file(RELATIVE_PATH XG_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
set(XG_PC_REQUIRES "fmt")
if(XG_HAVE_MPI)
  string(APPEND XG_PC_REQUIRES " ompi-c")  # Open MPI's own .pc
endif()
configure_file(cmake/xgrad.pc.in ${CMAKE_CURRENT_BINARY_DIR}/xgrad.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/xgrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME libxgrad-dev)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "xgrad developers <xgrad@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas-dev, libfmt-dev, zlib1g-dev, pkg-config, libonnx-dev, libprotobuf-dev")
if(XG_GEMM STREQUAL "onednn")
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libdnnl-dev, libgomp1")
endif()
if(XG_HAVE_MPI)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
include(CPack)
