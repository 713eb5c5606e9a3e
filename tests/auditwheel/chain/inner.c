/* The end of the chain: libinner.so, found by libouter.so through its DT_NEEDED only. */
#include "chain.h"

int inner_value(int x) { return 3 * x + 1; }
