// The composition root's entry point: everything is built and wired in inac::cli::Main.
#include "cli/cli.h"

int main(int argc, char** argv) { return inac::cli::Main(argc, argv); }
