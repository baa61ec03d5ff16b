# Stands in for a PyTorch 2.9 libtorch: manypy's configure must refuse it
# before it looks at anything else the package would provide.
set(TORCH_FOUND TRUE)
set(TORCH_LIBRARIES torch)
set(TORCH_INSTALL_PREFIX "${CMAKE_CURRENT_LIST_DIR}")
