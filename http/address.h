// Host:port strings and loopback addresses, as the API server and its clients read them.
// Nothing INAC-specific: the rules of where a server may listen live with the REST adapter
// (northbound/http_api.h, CheckListenRule).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace inac::http {

// Splits "host:port" (IPv6 in brackets: "[::1]:8080" gives "::1"); InvalidArgument for a
// malformed value or a port outside 0..65535.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

// True for the address literals 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104, and for "localhost";
// false for any other name (even "127.example").
bool IsLoopbackHost(const std::string& host);

}  // namespace inac::http
