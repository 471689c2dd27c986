#include "CNetShims.h"
