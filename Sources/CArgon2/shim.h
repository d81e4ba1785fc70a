#ifndef KINDRED_CARGON2_SHIM_H
#define KINDRED_CARGON2_SHIM_H
#include <argon2.h>
#include <sys/random.h>
#endif
