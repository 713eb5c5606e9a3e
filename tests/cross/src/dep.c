/* libdep.so: the library the test program links against. */
#include <string.h>
const char *dep_marker(void) { return "DEP1"; }
/* For the symbol renames: the library's dep_alt renamed to dep_marker (or the program's
   dep_marker renamed to dep_alt) makes the program print this marker instead. */
const char *dep_alt(void) { return "DEPR"; }
/* Not strlen: renamed in the program (with its version cleared) it becomes libc's strlen. */
unsigned long dep_len(const char *s) { return 1000 + strlen(s); }
