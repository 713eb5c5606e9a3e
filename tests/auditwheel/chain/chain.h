/* The two libraries' interface: outer_value(x) = 2 * inner_value(x) + 7, inner_value(x) = 3x + 1. */
#ifndef CHAIN_H
#define CHAIN_H
int inner_value(int x);
int outer_value(int x);
#endif
