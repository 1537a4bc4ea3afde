#include "report/html_report.h"

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace cuvil::report {

namespace {

// Text safe inside a <script> element: no "</script" can close it early, no "<!--" can open a comment state. JSON
// data escapes every "</" and "<!" ("<\/" reads as "</" in JSON and in JS strings); the scripts (ours, Chart.js)
// hold neither sequence outside strings, where the same escape is harmless.
std::string script_safe(const std::string& s, bool data) {
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size()) {
      bool close = s.compare(i, 8, "</script") == 0 || s.compare(i, 8, "</SCRIPT") == 0;
      bool comment = s.compare(i, 4, "<!--") == 0;
      if (close || comment || (data && (s[i + 1] == '/' || s[i + 1] == '!'))) {
        r += "<\\";
        continue;
      }
    }
    r += s[i];
  }
  return r;
}

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '<') r += "&lt;";
    else if (c == '>') r += "&gt;";
    else if (c == '&') r += "&amp;";
    else if (c == '"') r += "&quot;";
    else r += c;
  }
  return r;
}

}  // namespace

std::string profile_html(const std::string& report_json) {
  nlohmann::json j = nlohmann::json::parse(report_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "cuvil-profile" || j.value("version", 0) != 1)
    fail("not a cuvil profile report (version 1)");
  // (dumped again: ensure_ascii keeps the page's bytes plain ASCII whatever names the model holds)
  std::string data = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  std::string title = html_escape(j.value("model", std::string()).empty() ? j.value("graph", std::string("model"))
                                                                           : j.value("model", std::string()));
  std::string page;
  page.reserve(data.size() + 256 * 1024);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Cuvil profile: " + title +
          "</title>\n<style>\n" + std::string(kReportCss) + "</style>\n</head>\n<body>\n";
  page += "<h1>Cuvil profile: " + title + "</h1>\n<pre id=\"errors\" hidden></pre>\n";
  page += "<section id=\"summary\"><h2>Summary</h2></section>\n";
  page += "<section><h2>Roofline and time per op</h2><div class=\"charts\">"
          "<canvas id=\"roofline-chart\" width=\"640\" height=\"420\"></canvas>"
          "<canvas id=\"ops-chart\" width=\"560\" height=\"420\"></canvas></div></section>\n";
  page += "<section id=\"table\"><h2>Kernels</h2><p>Click a column to sort; a fused kernel's button lists its IR "
          "nodes and their source lines.</p></section>\n";
  page += "<footer>Made by cuvil profile. Charts: Chart.js 3.9.1 (MIT license), inlined.</footer>\n";
  page += "<script id=\"cuvil-profile\" type=\"application/json\">" + script_safe(data, true) + "</script>\n";
  page += "<script>\n" + script_safe(kChartJs, false) + "\n</script>\n";
  page += "<script>\n" + script_safe(kReportJs, false) + "\n</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace cuvil::report
