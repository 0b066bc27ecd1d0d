#include <math.h>
#define CUDART_INF_F INFINITY
