#include "storage/migrations.h"

namespace inac::storage {

int LatestSchemaVersion() { return Migrations().back().version; }

}  // namespace inac::storage
