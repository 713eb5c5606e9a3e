/* libdep2.so: a renamed stand-in for libdep.so with a different marker,
   the target of --replace-needed libdep.so libdep2.so. */
const char *dep_marker(void) { return "DEP2"; }
