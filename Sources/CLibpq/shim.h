#ifndef KINDRED_CLIBPQ_SHIM_H
#define KINDRED_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
