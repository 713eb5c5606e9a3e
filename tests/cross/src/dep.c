/* libdep.so: the library the test program links against. */
const char *dep_marker(void) { return "DEP1"; }
