// Library information.
#include "status.h"

extern "C" const char *fsattn_version(void) { return FSATTN_VERSION_STRING; }
