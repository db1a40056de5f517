// Compiles the tests' shared precompiled header (tests/CMakeLists.txt). It is an executable
// so that it is compiled with the same flags (-fPIE) as the test binaries that reuse it.
int main() { return 0; }
