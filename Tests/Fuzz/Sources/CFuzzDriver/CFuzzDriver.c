// The declaration in include/CFuzzDriver.h is all there is: libFuzzer (linked by -sanitize=fuzzer) defines it.
#include "CFuzzDriver.h"
