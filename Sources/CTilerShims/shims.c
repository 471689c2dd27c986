#include "CTilerShims.h"

int tiler_vips_init(const char *program) {
    return VIPS_INIT(program);
}
