# `dtrain data imagefolder` (io/imagefolder.hpp): the Fashion-MNIST image-tree
# fixture (written with TurboJPEG, libpng, libexif, libvips), its unit tests in
# dtrain_tests, the dtrain_make_image_tree tool and the integration test
# it_imagefolder (kill + resume, the command line's exit codes).
add_library(dtrain_image_fixture STATIC image_tree.cpp)
target_include_directories(dtrain_image_fixture PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(dtrain_image_fixture PUBLIC dtrain_io
  PkgConfig::TURBOJPEG PkgConfig::PNG PkgConfig::EXIF PkgConfig::VIPS)
target_compile_options(dtrain_image_fixture PRIVATE ${DTRAIN_WARNINGS})

target_sources(dtrain_tests PRIVATE test_imagefolder.cpp)
target_link_libraries(dtrain_tests PRIVATE dtrain_image_fixture)

add_executable(dtrain_make_image_tree make_image_tree.cpp)
target_link_libraries(dtrain_make_image_tree PRIVATE dtrain_image_fixture)
target_compile_options(dtrain_make_image_tree PRIVATE ${DTRAIN_WARNINGS})

add_test(NAME it_imagefolder COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/imagefolder.sh)
set_tests_properties(it_imagefolder PROPERTIES
  ENVIRONMENT "${DTRAIN_IT_ENV};MAKE_TREE=$<TARGET_FILE:dtrain_make_image_tree>"
  LABELS integration TIMEOUT 300)

# Training from a converted tree within 1 point of training from the IDX file (~5 min).
add_test(NAME it_imagefolder_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/imagefolder_train.sh)
set_tests_properties(it_imagefolder_train PROPERTIES
  ENVIRONMENT "${DTRAIN_IT_ENV};MAKE_TREE=$<TARGET_FILE:dtrain_make_image_tree>"
  LABELS integration TIMEOUT 900)
