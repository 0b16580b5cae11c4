// The loaders' private view of the public reader (stepcast/models/json_reader.h): the
// loader helpers in namespace detail use its names unqualified.
#pragma once

#include "stepcast/models/json_reader.h"

namespace stepcast::detail {

using reader::closest;
using reader::describe;
using reader::Diagnostics;
using reader::edit_distance;
using reader::join;
using reader::json;
using reader::ObjectReader;
using reader::printable;

}  // namespace stepcast::detail
