#ifndef KINDRED_CNGHTTP2_SHIM_H
#define KINDRED_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
static inline int cnghttp2_version_number(void) { return NGHTTP2_VERSION_NUM; }
#endif
