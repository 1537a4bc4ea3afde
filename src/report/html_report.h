// The HTML profile report: one self-contained file (the report's JSON, Chart.js and the page's script and style
// inline; it opens offline) with the summary, the sortable kernel table with fused kernels expanded into their
// IR nodes and source lines, the roofline and the time per op. The assets (assets/, with Chart.js in assets/chartjs) are
// compiled in (CMake writes report_assets.cpp from them).
#pragma once

#include <string>

namespace cuvil::report {

// The page for a report (profile_report.h's JSON). Throws cuvil::Error on a document that is not a report.
std::string profile_html(const std::string& report_json);

// The compiled-in assets (report_assets.cpp, generated).
extern const char* const kChartJs;    // src/report/assets/chartjs/chart.min.js
extern const char* const kReportJs;   // src/report/assets/report.js
extern const char* const kReportCss;  // src/report/assets/report.css

}  // namespace cuvil::report
