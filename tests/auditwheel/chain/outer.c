/* libouter.so: what the extension links against; it needs libinner.so in turn, so auditwheel
 * has to graft both and rewrite libouter's DT_NEEDED to the grafted libinner's new name. */
#include "chain.h"

int outer_value(int x) { return 2 * inner_value(x) + 7; }
