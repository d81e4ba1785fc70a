#ifndef KINDRED_CMALLOC_SHIM_H
#define KINDRED_CMALLOC_SHIM_H
#include <malloc.h>
#endif
