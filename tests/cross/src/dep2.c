/* libdep2.so: a renamed stand-in for libdep.so with a different marker,
   the target of --replace-needed libdep.so libdep2.so. */
#include <string.h>
const char *dep_marker(void) { return "DEP2"; }
const char *dep_alt(void) { return "DEPR"; }
unsigned long dep_len(const char *s) { return 1000 + strlen(s); }
