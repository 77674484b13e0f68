#include "northbound/web_assets.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "northbound/rest_router.h"

namespace inac::northbound {

namespace {

// Scripts, styles, images and API calls from this origin only; uPlot and Cytoscape set inline
// style attributes, hence 'unsafe-inline' for styles (never for scripts).
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

bool ETagMatches(const std::string& if_none_match, std::string_view etag) {
  for (absl::string_view item : absl::StrSplit(if_none_match, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item == "*") return true;
    absl::ConsumePrefix(&item, "W/");  // If-None-Match compares weakly (RFC 9110 13.1.2)
    if (item == absl::string_view(etag.data(), etag.size())) return true;
  }
  return false;
}

}  // namespace

bool IsDashboardPath(std::string_view url_path) {
  return url_path == "/" || url_path == "/ui" || url_path.starts_with("/ui/");
}

const WebAsset* FindWebAsset(std::string_view url_path) {
  std::string_view file;
  if (url_path == "/" || url_path == "/ui" || url_path == "/ui/") {
    file = "index.html";
  } else if (url_path.starts_with("/ui/")) {
    file = url_path.substr(4);
  } else {
    return nullptr;
  }
  for (const WebAsset& asset : EmbeddedWebAssets()) {
    if (asset.path == file) return &asset;
  }
  return nullptr;
}

void ServeWebAsset(const httplib::Request& req, httplib::Response& res) {
  const WebAsset* asset = FindWebAsset(req.path);
  if (asset == nullptr) {
    return rest::SendError(
        res, 404, "not_found",
        absl::StrCat("no dashboard file ", req.path, " (the dashboard is at /)"));
  }
  res.set_header("ETag", std::string(asset->etag));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  if (req.has_header("If-None-Match") &&
      ETagMatches(req.get_header_value("If-None-Match"), asset->etag)) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(std::string(asset->body), std::string(asset->content_type));
}

}  // namespace inac::northbound
