// The operator's dashboard (docs/dashboard.md): the files of web/ compiled into the
// binary (northbound/embed_web.cmake generates EmbeddedWebAssets at build time) and served by
// HttpApi at `/` (index.html) and under `/ui/` -- no CDN, no file system, no build step at run
// time. The files hold no data, so they are served without a token; every datum the page shows
// comes from the authenticated JSON API under /api/v1.
//
// Answers: GET only (405 with Allow otherwise, decided by HttpApi); 200 with the file's media
// type, a strong ETag (the first 80 bits of its SHA-256, hex), `Cache-Control: no-cache` (the
// browser revalidates each time and gets 304 while the binary is unchanged) and headers that keep
// the page to its own origin (Content-Security-Policy: scripts and connections from 'self' only;
// X-Content-Type-Options: nosniff; frame-ancestors 'none'; Referrer-Policy: no-referrer); 304 when
// If-None-Match names the ETag (or is `*`); 404 with the JSON error body for an unknown file.
//
// Thread safety: the table is immutable; every function may be called from any thread.
#pragma once

#include <httplib.h>

#include <span>
#include <string_view>

namespace inac::northbound {

// One embedded file: `path` relative to web/ ("index.html", "vendor/uPlot.min.css").
struct WebAsset {
  std::string_view path;
  std::string_view content_type;
  std::string_view etag;  // quoted, strong
  std::string_view body;
};

// Every file of web/ (generated).
std::span<const WebAsset> EmbeddedWebAssets();

// True for the dashboard's URL paths: "/", "/ui" and everything under "/ui/".
bool IsDashboardPath(std::string_view url_path);
// The file served at `url_path` ("/", "/ui" and "/ui/" are index.html; "/ui/<file>"), or nullptr.
const WebAsset* FindWebAsset(std::string_view url_path);
// Answers a GET of a dashboard path (see above).
void ServeWebAsset(const httplib::Request& req, httplib::Response& res);

}  // namespace inac::northbound
