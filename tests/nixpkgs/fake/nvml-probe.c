/* Calls into libnvidia-ml.so.1 and reports what came back; the stub answers 999. */
#include <stdio.h>

int nvmlInit_v2(void);

int main(void) {
  printf("nvmlInit_v2 returned %d\n", nvmlInit_v2());
  return 0;
}
