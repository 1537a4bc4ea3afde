// `cuvil serve --model-repository DIR [...]`: the server's command line, start-up and graceful shutdown.
#pragma once

namespace cuvil::serving {

// argv[0] is "serve". Returns the process exit code; prints errors itself.
int serve_main(int argc, char** argv);

}  // namespace cuvil::serving
