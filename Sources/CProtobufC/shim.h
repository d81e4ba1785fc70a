#ifndef KINDRED_CPROTOBUFC_SHIM_H
#define KINDRED_CPROTOBUFC_SHIM_H
#include <protobuf-c/protobuf-c.h>
#endif
