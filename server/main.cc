// The composition root's entry point: everything is built and wired in inac::server::Main.
#include "server/cli.h"

int main(int argc, char** argv) { return inac::server::Main(argc, argv); }
