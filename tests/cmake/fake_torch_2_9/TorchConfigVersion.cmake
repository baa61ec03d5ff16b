# A libtorch that says it is 2.9.0, for the configure-time refusal test.
set(PACKAGE_VERSION "2.9.0")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
