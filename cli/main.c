/* main.c - the eddy binary: dispatches to subcommands. */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "eddy: not yet\n");
    return 2;
}
