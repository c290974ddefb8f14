// The one way C++ files in src/pg include PostgreSQL: inside extern "C", followed by
// #undefs of the port.h macros that break the C++ standard library and client headers.
// Plain C++ code (src/core, src/sinks) must not include this file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}

#include "pg/pg_compat.hpp"

#undef snprintf
#undef vsnprintf
#undef sprintf
#undef vsprintf
#undef fprintf
#undef vfprintf
#undef printf
#undef vprintf
#undef strerror
#undef strerror_r
#undef unlink
#undef bind
#undef gettext
#undef dgettext
#undef ngettext
#undef dngettext
